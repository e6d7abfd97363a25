//! Just enough protobuf to read OpenTelemetry's `MetricsData` (the payload
//! KIP-714 clients push): metric names and the values of their data points
//! with the points' attributes. Gauges and sums give their value;
//! histograms, exponential histograms and summaries give `<name>.count`
//! and `<name>.sum`. Unknown fields are skipped, as protobuf requires.
//!
//! ```text
//! MetricsData      { repeated ResourceMetrics resource_metrics = 1; }
//! ResourceMetrics  { Resource resource = 1; repeated ScopeMetrics scope_metrics = 2; }
//! ScopeMetrics     { InstrumentationScope scope = 1; repeated Metric metrics = 2; }
//! Metric           { string name = 1; Gauge gauge = 5; Sum sum = 7; Histogram histogram = 9;
//!                    ExponentialHistogram exponential_histogram = 10; Summary summary = 11; }
//! Gauge, Sum       { repeated NumberDataPoint data_points = 1; }
//! NumberDataPoint  { double as_double = 4; sfixed64 as_int = 6; repeated KeyValue attributes = 7; }
//! HistogramDataPoint { fixed64 count = 4; double sum = 5; repeated KeyValue attributes = 9; }
//! ExponentialHistogramDataPoint { KeyValue attributes = 1; fixed64 count = 4; double sum = 5; }
//! SummaryDataPoint { fixed64 count = 4; double sum = 5; repeated KeyValue attributes = 7; }
//! KeyValue         { string key = 1; AnyValue value = 2; }
//! AnyValue         { string string_value = 1; bool bool_value = 2; int64 int_value = 3;
//!                    double double_value = 4; ... }
//! ```

use gregor_sdk::telemetry::MetricPoint;

/// Points decoded from one push, at most this many (a bound on memory).
const MAX_POINTS: usize = 10_000;

/// One field of a message: its number and value.
enum Value<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32,
}

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self.buf.split_first().ok_or("truncated varint")?;
            self.buf = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("varint too long".into())
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], String> {
        if self.buf.len() < len {
            return Err("truncated field".into());
        }
        let (head, rest) = self.buf.split_at(len);
        self.buf = rest;
        Ok(head)
    }

    /// The next field, or None at the end of the message.
    fn field(&mut self) -> Result<Option<(u64, Value<'a>)>, String> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let value = match key & 7 {
            0 => Value::Varint(self.varint()?),
            1 => {
                let bytes: [u8; 8] = self
                    .take(8)?
                    .try_into()
                    .map_err(|_| "truncated fixed64".to_string())?;
                Value::Fixed64(u64::from_le_bytes(bytes))
            }
            2 => {
                let len = usize::try_from(self.varint()?).map_err(|_| "length too large")?;
                Value::Bytes(self.take(len)?)
            }
            5 => {
                self.take(4)?;
                Value::Fixed32
            }
            other => return Err(format!("unsupported wire type {other}")),
        };
        Ok(Some((key >> 3, value)))
    }
}

/// The fields of a message with this number that are messages or strings.
fn each<'a>(
    buf: &'a [u8],
    number: u64,
    mut f: impl FnMut(&'a [u8]) -> Result<(), String>,
) -> Result<(), String> {
    let mut reader = Reader::new(buf);
    while let Some((field, value)) = reader.field()? {
        if field == number {
            if let Value::Bytes(bytes) = value {
                f(bytes)?;
            }
        }
    }
    Ok(())
}

fn text(bytes: &[u8]) -> Result<String, String> {
    std::str::from_utf8(bytes)
        .map(str::to_string)
        .map_err(|_| "string is not UTF-8".to_string())
}

/// Decodes `MetricsData` into data points.
pub fn decode_metrics(buf: &[u8]) -> Result<Vec<MetricPoint>, String> {
    let mut points = Vec::new();
    each(buf, 1, |resource_metrics| {
        each(resource_metrics, 2, |scope_metrics| {
            each(scope_metrics, 2, |metric| {
                decode_metric(metric, &mut points)
            })
        })
    })?;
    Ok(points)
}

fn decode_metric(buf: &[u8], points: &mut Vec<MetricPoint>) -> Result<(), String> {
    let mut name = String::new();
    let mut data: Vec<(u64, &[u8])> = Vec::new();
    let mut reader = Reader::new(buf);
    while let Some((field, value)) = reader.field()? {
        match (field, value) {
            (1, Value::Bytes(bytes)) => name = text(bytes)?,
            (5 | 7 | 9 | 10 | 11, Value::Bytes(bytes)) => data.push((field, bytes)),
            _ => {}
        }
    }
    for (kind, bytes) in data {
        each(bytes, 1, |point| {
            if points.len() >= MAX_POINTS {
                return Ok(());
            }
            match kind {
                5 | 7 => number_point(&name, point, points),
                9 => count_sum_point(&name, point, 9, points),
                10 => count_sum_point(&name, point, 1, points),
                _ => count_sum_point(&name, point, 7, points),
            }
        })?;
    }
    Ok(())
}

fn number_point(name: &str, buf: &[u8], points: &mut Vec<MetricPoint>) -> Result<(), String> {
    let mut value = None;
    let mut attributes = Vec::new();
    let mut reader = Reader::new(buf);
    while let Some((field, v)) = reader.field()? {
        match (field, v) {
            (4, Value::Fixed64(bits)) => value = Some(f64::from_bits(bits)),
            (6, Value::Fixed64(bits)) => value = Some(bits as i64 as f64),
            (7, Value::Bytes(bytes)) => attributes.push(key_value(bytes)?),
            _ => {}
        }
    }
    if let Some(value) = value {
        points.push(MetricPoint {
            name: name.to_string(),
            attributes,
            value,
        });
    }
    Ok(())
}

/// Histogram-like points: their count and sum; `attributes_field` differs
/// between the point types.
fn count_sum_point(
    name: &str,
    buf: &[u8],
    attributes_field: u64,
    points: &mut Vec<MetricPoint>,
) -> Result<(), String> {
    let (mut count, mut sum) = (None, None);
    let mut attributes = Vec::new();
    let mut reader = Reader::new(buf);
    while let Some((field, v)) = reader.field()? {
        match (field, v) {
            (4, Value::Fixed64(bits)) => count = Some(bits as f64),
            (5, Value::Fixed64(bits)) => sum = Some(f64::from_bits(bits)),
            (f, Value::Bytes(bytes)) if f == attributes_field => attributes.push(key_value(bytes)?),
            _ => {}
        }
    }
    for (suffix, value) in [("count", count), ("sum", sum)] {
        if let Some(value) = value {
            points.push(MetricPoint {
                name: format!("{name}.{suffix}"),
                attributes: attributes.clone(),
                value,
            });
        }
    }
    Ok(())
}

fn key_value(buf: &[u8]) -> Result<(String, String), String> {
    let (mut key, mut value) = (String::new(), String::new());
    let mut reader = Reader::new(buf);
    while let Some((field, v)) = reader.field()? {
        match (field, v) {
            (1, Value::Bytes(bytes)) => key = text(bytes)?,
            (2, Value::Bytes(bytes)) => value = any_value(bytes)?,
            _ => {}
        }
    }
    Ok((key, value))
}

fn any_value(buf: &[u8]) -> Result<String, String> {
    let mut reader = Reader::new(buf);
    let mut value = String::new();
    while let Some((field, v)) = reader.field()? {
        value = match (field, v) {
            (1, Value::Bytes(bytes)) => text(bytes)?,
            (2, Value::Varint(flag)) => (flag != 0).to_string(),
            (3, Value::Varint(number)) => (number as i64).to_string(),
            (4, Value::Fixed64(bits)) => f64::from_bits(bits).to_string(),
            _ => continue,
        };
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(mut value: u64, out: &mut Vec<u8>) {
        loop {
            let byte = (value & 0x7f) as u8;
            value >>= 7;
            if value == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }

    fn bytes_field(number: u64, bytes: &[u8], out: &mut Vec<u8>) {
        varint(number << 3 | 2, out);
        varint(bytes.len() as u64, out);
        out.extend_from_slice(bytes);
    }

    fn fixed64_field(number: u64, value: u64, out: &mut Vec<u8>) {
        varint(number << 3 | 1, out);
        out.extend_from_slice(&value.to_le_bytes());
    }

    #[test]
    fn gauges_sums_and_histograms_decode() {
        let mut any = Vec::new();
        bytes_field(1, b"orders", &mut any);
        let mut kv = Vec::new();
        bytes_field(1, b"topic", &mut kv);
        bytes_field(2, &any, &mut kv);
        let mut point = Vec::new();
        fixed64_field(4, 2.5f64.to_bits(), &mut point);
        bytes_field(7, &kv, &mut point);
        varint(8 << 3, &mut point); // flags: a varint field to skip
        varint(1, &mut point);
        let mut gauge = Vec::new();
        bytes_field(1, &point, &mut gauge);
        let mut metric = Vec::new();
        bytes_field(
            1,
            b"org.apache.kafka.producer.record.queue.time.avg",
            &mut metric,
        );
        bytes_field(5, &gauge, &mut metric);

        let mut hist_point = Vec::new();
        fixed64_field(4, 3, &mut hist_point);
        fixed64_field(5, 9.0f64.to_bits(), &mut hist_point);
        let mut histogram = Vec::new();
        bytes_field(1, &hist_point, &mut histogram);
        let mut metric2 = Vec::new();
        bytes_field(1, b"latency", &mut metric2);
        bytes_field(9, &histogram, &mut metric2);

        let mut scope = Vec::new();
        bytes_field(2, &metric, &mut scope);
        bytes_field(2, &metric2, &mut scope);
        let mut resource = Vec::new();
        bytes_field(2, &scope, &mut resource);
        let mut data = Vec::new();
        bytes_field(1, &resource, &mut data);

        let points = decode_metrics(&data).unwrap();
        assert_eq!(points.len(), 3);
        assert_eq!(points[0].value, 2.5);
        assert_eq!(
            points[0].attributes,
            vec![("topic".to_string(), "orders".to_string())]
        );
        assert_eq!(points[1].name, "latency.count");
        assert_eq!(points[2].value, 9.0);
        assert!(decode_metrics(&[0x0a, 0x05, 0x01]).is_err());
    }
}
