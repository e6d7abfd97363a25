//! `gregor-floor`: the native floor of the cost per GiB on this machine.
//!
//! A broker that receives records over loopback TCP and appends them to a
//! file (produce), or reads them from a file and sends them back over TCP
//! (consume), cannot spend less CPU than a program that does only that.
//! `bench/run.py` measures this server's CPU (user + system from
//! `/proc/<pid>/stat`, as for the brokers) while the client moves the same
//! payload bytes as a benchmark scenario, and prints each broker's cost as a
//! multiple of it. No framing, no parsing, no index: a byte stream.
//!
//! ```text
//! gregor-floor serve   --port P --file PATH     # the measured side; serves until killed
//! gregor-floor produce --port P --bytes N       # client: N bytes in, acknowledged
//! gregor-floor consume --port P                 # client: the whole file back
//! ```
//!
//! Protocol: the client's first byte picks the direction. `P`: the client
//! streams bytes and shuts its write side down; the server appends every
//! read to the file and answers with the byte count (u64, big-endian) once
//! all of it is written, so the client's exit means the work is done. `C`:
//! the server sends the file's contents with read + write (no `sendfile`)
//! and closes.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::ExitCode;
use std::time::Instant;

/// The buffer of every read and write: large enough that syscalls are not
/// the floor's cost, as a broker handles batches, not records.
const BUFFER: usize = 256 * 1024;

fn flag(args: &[String], name: &str) -> Result<String, String> {
    args.windows(2)
        .find(|pair| pair[0] == format!("--{name}"))
        .map(|pair| pair[1].clone())
        .ok_or_else(|| format!("--{name} is required"))
}

fn number(args: &[String], name: &str) -> Result<u64, String> {
    let raw = flag(args, name)?;
    raw.parse()
        .map_err(|_| format!("--{name}: not a number: {raw}"))
}

fn port(args: &[String]) -> Result<u16, String> {
    u16::try_from(number(args, "port")?).map_err(|_| "--port: out of range".to_string())
}

/// Appends everything the client sends to `path`, then acknowledges.
fn receive(mut stream: TcpStream, path: &str, buffer: &mut [u8]) -> Result<(), String> {
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("open {path}: {e}"))?;
    let mut total = 0u64;
    loop {
        let n = stream.read(buffer).map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            break;
        }
        file.write_all(&buffer[..n])
            .map_err(|e| format!("append to {path}: {e}"))?;
        total += n as u64;
    }
    stream
        .write_all(&total.to_be_bytes())
        .map_err(|e| format!("acknowledge: {e}"))
}

/// Sends the file at `path` to the client, then closes.
fn send_file(mut stream: TcpStream, path: &str, buffer: &mut [u8]) -> Result<(), String> {
    let mut file = File::open(path).map_err(|e| format!("open {path}: {e}"))?;
    loop {
        let n = file.read(buffer).map_err(|e| format!("read {path}: {e}"))?;
        if n == 0 {
            return Ok(());
        }
        stream
            .write_all(&buffer[..n])
            .map_err(|e| format!("send: {e}"))?;
    }
}

/// One connection at a time, until killed: the measured process.
fn serve(args: &[String]) -> Result<(), String> {
    let path = flag(args, "file")?;
    let listener =
        TcpListener::bind(("127.0.0.1", port(args)?)).map_err(|e| format!("listen: {e}"))?;
    let mut buffer = vec![0u8; BUFFER];
    for stream in listener.incoming() {
        let mut stream = stream.map_err(|e| format!("accept: {e}"))?;
        let mut direction = [0u8; 1];
        // A connection that closes at once is the readiness probe.
        if stream
            .read(&mut direction)
            .map_err(|e| format!("read: {e}"))?
            == 0
        {
            continue;
        }
        let served = match direction[0] {
            b'P' => receive(stream, &path, &mut buffer),
            b'C' => send_file(stream, &path, &mut buffer),
            other => Err(format!("unknown direction byte {other}")),
        };
        // A failed transfer is the client's to report; keep serving.
        if let Err(error) = served {
            eprintln!("gregor-floor: {error}");
        }
    }
    Ok(())
}

fn report(direction: &str, bytes: u64, started: Instant) {
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "{{\"bench\":\"floor\",\"direction\":\"{direction}\",\"bytes\":{bytes},\"seconds\":{seconds:.3},\"mb_per_sec\":{:.2}}}",
        bytes as f64 / seconds / 1_000_000.0
    );
}

fn produce(args: &[String]) -> Result<(), String> {
    let bytes = number(args, "bytes")?;
    let mut stream =
        TcpStream::connect(("127.0.0.1", port(args)?)).map_err(|e| format!("connect: {e}"))?;
    let chunk = vec![b'x'; BUFFER];
    let started = Instant::now();
    stream.write_all(b"P").map_err(|e| format!("send: {e}"))?;
    let mut left = bytes;
    while left > 0 {
        let n = left.min(BUFFER as u64) as usize;
        stream
            .write_all(&chunk[..n])
            .map_err(|e| format!("send: {e}"))?;
        left -= n as u64;
    }
    stream
        .shutdown(Shutdown::Write)
        .map_err(|e| format!("shutdown: {e}"))?;
    let mut ack = [0u8; 8];
    stream
        .read_exact(&mut ack)
        .map_err(|e| format!("acknowledgement: {e}"))?;
    let written = u64::from_be_bytes(ack);
    if written != bytes {
        return Err(format!("the server wrote {written} of {bytes} bytes"));
    }
    report("produce", bytes, started);
    Ok(())
}

fn consume(args: &[String]) -> Result<(), String> {
    let mut stream =
        TcpStream::connect(("127.0.0.1", port(args)?)).map_err(|e| format!("connect: {e}"))?;
    let mut buffer = vec![0u8; BUFFER];
    let started = Instant::now();
    stream.write_all(b"C").map_err(|e| format!("send: {e}"))?;
    let mut bytes = 0u64;
    loop {
        let n = stream.read(&mut buffer).map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            break;
        }
        bytes += n as u64;
    }
    report("consume", bytes, started);
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("serve") => serve(&args[1..]),
        Some("produce") => produce(&args[1..]),
        Some("consume") => consume(&args[1..]),
        _ => Err("usage: gregor-floor serve|produce|consume --port P ...".to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("gregor-floor: {error}");
            ExitCode::FAILURE
        }
    }
}
