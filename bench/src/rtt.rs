//! The plugin path seen from a client: round trips of small requests that
//! each go through one handler module (ApiVersions, Metadata) over one
//! loopback connection, hand-encoded so the client adds nothing.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Instant;

use crate::stats::percentile;

pub struct Rtt {
    pub name: &'static str,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
}

impl Rtt {
    pub fn json(&self) -> String {
        format!(
            "{{\"bench\":\"rtt\",\"request\":\"{}\",\"p50_us\":{:.1},\"p99_us\":{:.1},\"p99_9_us\":{:.1}}}",
            self.name, self.p50_us, self.p99_us, self.p999_us
        )
    }
}

/// Request frame, header v1 (ApiVersions v0 and Metadata v1 are not flexible).
fn frame(api_key: i16, version: i16, correlation_id: i32, body: &[u8]) -> Vec<u8> {
    let client_id = b"gregor-bench";
    let mut payload = Vec::new();
    payload.extend_from_slice(&api_key.to_be_bytes());
    payload.extend_from_slice(&version.to_be_bytes());
    payload.extend_from_slice(&correlation_id.to_be_bytes());
    payload.extend_from_slice(&(client_id.len() as i16).to_be_bytes());
    payload.extend_from_slice(client_id);
    payload.extend_from_slice(body);
    let mut out = (payload.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&payload);
    out
}

fn measure(
    stream: &mut TcpStream,
    name: &'static str,
    request: &[u8],
    iterations: usize,
) -> Result<Rtt, String> {
    let mut samples = Vec::with_capacity(iterations);
    let mut size = [0u8; 4];
    let mut buf = Vec::new();
    for i in 0..iterations + iterations / 10 {
        let started = Instant::now();
        stream
            .write_all(request)
            .map_err(|e| format!("{name}: {e}"))?;
        stream
            .read_exact(&mut size)
            .map_err(|e| format!("{name}: {e}"))?;
        let len = usize::try_from(i32::from_be_bytes(size)).map_err(|_| "bad size".to_string())?;
        buf.resize(len, 0);
        stream
            .read_exact(&mut buf)
            .map_err(|e| format!("{name}: {e}"))?;
        // The first tenth warms the instance pools up; it is not counted.
        if i >= iterations / 10 {
            samples.push(started.elapsed().as_nanos() as u64);
        }
    }
    samples.sort_unstable();
    Ok(Rtt {
        name,
        p50_us: percentile(&samples, 50.0) / 1000.0,
        p99_us: percentile(&samples, 99.0) / 1000.0,
        p999_us: percentile(&samples, 99.9) / 1000.0,
    })
}

pub fn run(bootstrap: &str, iterations: usize) -> Result<Vec<Rtt>, String> {
    let mut stream = TcpStream::connect(bootstrap).map_err(|e| format!("connect: {e}"))?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    let api_versions = frame(18, 0, 1, &[]);
    // Metadata v1 for no topics (an empty array): brokers and controller only.
    let metadata = frame(3, 1, 2, &0i32.to_be_bytes());
    Ok(vec![
        measure(&mut stream, "ApiVersions v0", &api_versions, iterations)?,
        measure(
            &mut stream,
            "Metadata v1 (no topics)",
            &metadata,
            iterations,
        )?,
    ])
}
