//! `gregor plugins ...`: the command-line face of the admin API.
//!
//! `gregor plugins list [--admin HOST:PORT]`
//! `gregor plugins load FILE [--name NAME] [--admin HOST:PORT]`
//! `gregor plugins unload NAME [--admin HOST:PORT]`
//! `gregor users list | add NAME --password P [--mechanism M]... [--iterations N] | delete NAME`
//! `gregor authorizer show | use NAME|none`

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};

const DEFAULT_ADMIN: &str = "127.0.0.1:9644";

pub fn run(args: &[String]) -> Result<()> {
    let mut name: Option<String> = None;
    let (admin, positional) = parse_args(args, &[("--name", "a value")], |_, value| {
        name = Some(value.clone());
        Ok(())
    })?;
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

/// Splits a command's words into `--admin HOST:PORT`, the flags of `flags`
/// (flag, what its value is), each handed to `take` as it comes, and the
/// positional words.
fn parse_args(
    args: &[String],
    flags: &[(&str, &str)],
    mut take: impl FnMut(&str, &String) -> Result<()>,
) -> Result<(String, Vec<String>)> {
    let mut admin = DEFAULT_ADMIN.to_string();
    let mut positional = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if arg == "--admin" {
            admin = iter.next().context("--admin needs HOST:PORT")?.clone();
        } else if let Some((flag, what)) = flags.iter().find(|(flag, _)| flag == arg) {
            take(
                flag,
                iter.next()
                    .with_context(|| format!("{flag} needs {what}"))?,
            )?;
        } else {
            positional.push(arg.clone());
        }
    }
    Ok((admin, positional))
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

const SECURITY_USAGE: &str = "usage: gregor users list | add NAME --password PASSWORD [--mechanism SCRAM-SHA-256|SCRAM-SHA-512]... [--iterations N] | delete NAME [--admin HOST:PORT]
       gregor authorizer show | use NAME|none [--admin HOST:PORT]";

/// `gregor users ...` (SCRAM credentials) and `gregor authorizer ...`
/// (which authorizer module decides), through the admin endpoint of a
/// running broker.
pub fn run_security(command: &str, args: &[String]) -> Result<()> {
    let mut password: Option<String> = None;
    let mut mechanisms: Vec<String> = Vec::new();
    let mut iterations: Option<u32> = None;
    let flags = [
        ("--password", "a value"),
        ("--mechanism", "a value"),
        ("--iterations", "a number"),
    ];
    let (admin, positional) = parse_args(args, &flags, |flag, value| {
        match flag {
            "--password" => password = Some(value.clone()),
            "--mechanism" => mechanisms.push(value.clone()),
            _ => iterations = Some(value.parse().context("--iterations needs a number")?),
        }
        Ok(())
    })?;
    let positional: Vec<&str> = positional.iter().map(String::as_str).collect();
    let (status, body) = match (command, positional.as_slice()) {
        ("users", ["list"]) => request(&admin, "GET", "/users", &[])?,
        ("users", ["add", name]) => {
            let password = password.context("users add needs --password")?;
            let mut body = serde_json::json!({ "password": password });
            if !mechanisms.is_empty() {
                body["mechanisms"] = serde_json::json!(mechanisms);
            }
            if let Some(iterations) = iterations {
                body["iterations"] = serde_json::json!(iterations);
            }
            let path = format!("/users/{}", percent_encode(name));
            request(&admin, "PUT", &path, body.to_string().as_bytes())?
        }
        ("users", ["delete", name]) => request(
            &admin,
            "DELETE",
            &format!("/users/{}", percent_encode(name)),
            &[],
        )?,
        ("authorizer", ["show"]) => request(&admin, "GET", "/authorizer", &[])?,
        ("authorizer", ["use", name]) => request(&admin, "PUT", "/authorizer", name.as_bytes())?,
        _ => bail!("{SECURITY_USAGE}"),
    };
    println!("{body}");
    if status != 200 {
        bail!("the admin endpoint answered HTTP {status}");
    }
    Ok(())
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
pub fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The inverse of [`percent_encode`]; None for malformed input.
pub fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_encoding_round_trips() {
        for name in ["alice", "a b/c%d@e", "ünï"] {
            assert_eq!(percent_decode(&percent_encode(name)).as_deref(), Some(name));
        }
        assert_eq!(percent_decode("%zz"), None);
        assert_eq!(percent_decode("%4"), None);
    }
}
