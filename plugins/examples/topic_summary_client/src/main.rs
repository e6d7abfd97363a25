//! `topic-summary [--bootstrap HOST:PORT] [TOPIC...]`: asks a Gregor broker
//! for DescribeTopicSummary (ApiKey 1000, added by the example module in
//! `plugins/examples/topic_summary`) over the Kafka wire protocol and
//! prints one line per partition. It first checks with ApiVersions that
//! the broker serves the key, as a Kafka client would.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::ExitCode;
use std::time::Duration;

const API_VERSIONS: i16 = 18;
const TOPIC_SUMMARY: i16 = 1000;

/// Sends one request (header v1) and returns the response body.
fn call(
    stream: &mut TcpStream,
    api_key: i16,
    correlation_id: i32,
    body: &[u8],
) -> Result<Vec<u8>, String> {
    let client_id = b"topic-summary";
    let mut frame = Vec::new();
    frame.extend_from_slice(&api_key.to_be_bytes());
    frame.extend_from_slice(&0i16.to_be_bytes());
    frame.extend_from_slice(&correlation_id.to_be_bytes());
    frame.extend_from_slice(&(client_id.len() as i16).to_be_bytes());
    frame.extend_from_slice(client_id);
    frame.extend_from_slice(body);
    let mut message = (frame.len() as i32).to_be_bytes().to_vec();
    message.extend_from_slice(&frame);
    stream
        .write_all(&message)
        .map_err(|e| format!("send: {e}"))?;
    let mut size = [0u8; 4];
    stream
        .read_exact(&mut size)
        .map_err(|e| format!("the broker closed the connection: {e}"))?;
    let size = usize::try_from(i32::from_be_bytes(size))
        .map_err(|_| "negative response size".to_string())?;
    let mut response = vec![0u8; size];
    stream
        .read_exact(&mut response)
        .map_err(|e| format!("receive: {e}"))?;
    if response.len() < 4 || response[..4] != correlation_id.to_be_bytes() {
        return Err("response correlation id mismatch".to_string());
    }
    Ok(response.split_off(4))
}

struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], String> {
        if self.0.len() < N {
            return Err("truncated response".to_string());
        }
        let mut out = [0u8; N];
        out.copy_from_slice(&self.0[..N]);
        self.0 = &self.0[N..];
        Ok(out)
    }
    fn i16(&mut self) -> Result<i16, String> {
        Ok(i16::from_be_bytes(self.take()?))
    }
    fn i32(&mut self) -> Result<i32, String> {
        Ok(i32::from_be_bytes(self.take()?))
    }
    fn i64(&mut self) -> Result<i64, String> {
        Ok(i64::from_be_bytes(self.take()?))
    }
    fn string(&mut self) -> Result<String, String> {
        let len = self.i16()?.max(0) as usize;
        if self.0.len() < len {
            return Err("truncated string".to_string());
        }
        let text = String::from_utf8_lossy(&self.0[..len]).into_owned();
        self.0 = &self.0[len..];
        Ok(text)
    }
}

fn run(bootstrap: &str, topics: &[String]) -> Result<(), String> {
    let mut stream =
        TcpStream::connect(bootstrap).map_err(|e| format!("connect {bootstrap}: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;

    let versions = call(&mut stream, API_VERSIONS, 1, &[])?;
    let mut cursor = Cursor(&versions);
    let error = cursor.i16()?;
    if error != 0 {
        return Err(format!("ApiVersions failed with error {error}"));
    }
    let served = (0..cursor.i32()?.max(0))
        .map(|_| Ok((cursor.i16()?, cursor.i16()?, cursor.i16()?)))
        .collect::<Result<Vec<_>, String>>()?;
    if !served.iter().any(|(key, _, _)| *key == TOPIC_SUMMARY) {
        return Err(
            "the broker does not serve DescribeTopicSummary (ApiKey 1000): is the module loaded?"
                .to_string(),
        );
    }

    let mut request = Vec::new();
    if topics.is_empty() {
        request.extend_from_slice(&(-1i32).to_be_bytes());
    } else {
        request.extend_from_slice(&(topics.len() as i32).to_be_bytes());
        for topic in topics {
            request.extend_from_slice(&(topic.len() as i16).to_be_bytes());
            request.extend_from_slice(topic.as_bytes());
        }
    }
    let body = call(&mut stream, TOPIC_SUMMARY, 2, &request)?;
    let mut cursor = Cursor(&body);
    let _throttle = cursor.i32()?;
    for _ in 0..cursor.i32()?.max(0) {
        let error = cursor.i16()?;
        let name = cursor.string()?;
        let id = u128::from_be_bytes(cursor.take()?);
        if error != 0 {
            println!("{name} error={error}");
        }
        let mut total = 0i64;
        for _ in 0..cursor.i32()?.max(0) {
            let partition = cursor.i32()?;
            let error = cursor.i16()?;
            let start = cursor.i64()?;
            let end = cursor.i64()?;
            total += (end - start).max(0);
            println!("{name} partition={partition} error={error} log_start_offset={start} log_end_offset={end}");
        }
        if error == 0 {
            println!("{name} id={id:032x} records={total}");
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let mut bootstrap = "127.0.0.1:9092".to_string();
    let mut topics = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--bootstrap" {
            match args.next() {
                Some(value) => bootstrap = value,
                None => {
                    eprintln!("--bootstrap needs HOST:PORT");
                    return ExitCode::from(2);
                }
            }
        } else {
            topics.push(arg);
        }
    }
    match run(&bootstrap, &topics) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("topic-summary: {error}");
            ExitCode::FAILURE
        }
    }
}
