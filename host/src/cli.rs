//! `gregor plugins ...`: the command-line face of the admin API.
//!
//! `gregor plugins list [--admin HOST:PORT]`
//! `gregor plugins load FILE [--name NAME] [--admin HOST:PORT]`
//! `gregor plugins unload NAME [--admin HOST:PORT]`

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};

const DEFAULT_ADMIN: &str = "127.0.0.1:9644";

pub fn run(args: &[String]) -> Result<()> {
    let mut admin = DEFAULT_ADMIN.to_string();
    let mut name: Option<String> = None;
    let mut positional = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "--admin" => admin = iter.next().context("--admin needs HOST:PORT")?.clone(),
            "--name" => name = Some(iter.next().context("--name needs a value")?.clone()),
            other => positional.push(other.to_string()),
        }
    }
    let (status, body) = match positional.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["list"] => request(&admin, "GET", "/plugins", &[])?,
        ["load", file] => {
            let path = Path::new(file);
            let bytes = std::fs::read(path).with_context(|| format!("reading {file}"))?;
            let name = match name {
                Some(name) => name,
                None => path
                    .file_stem()
                    .map(|stem| stem.to_string_lossy().into_owned())
                    .context("cannot derive a module name from the file; use --name")?,
            };
            request(&admin, "PUT", &format!("/plugins/{name}"), &bytes)?
        }
        ["unload", name] => request(&admin, "DELETE", &format!("/plugins/{name}"), &[])?,
        _ => bail!("usage: gregor plugins list | load FILE [--name NAME] | unload NAME [--admin HOST:PORT]"),
    };
    println!("{body}");
    if status != 200 {
        bail!("the admin endpoint answered HTTP {status}");
    }
    Ok(())
}

fn request(admin: &str, method: &str, path: &str, body: &[u8]) -> Result<(u16, String)> {
    let mut stream = TcpStream::connect(admin)
        .with_context(|| format!("connecting to the admin endpoint {admin}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(120)))?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {admin}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .context("malformed HTTP response")?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .context("malformed HTTP status line")?;
    Ok((status, body.to_string()))
}
