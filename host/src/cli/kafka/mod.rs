//! The Kafka-protocol half of the command line: `gregor topic|group|
//! produce|consume|cluster ...`, named and shaped as Kafka users know them
//! from `rpk` and Kafka's scripts. It speaks the Kafka protocol to any
//! broker (`--bootstrap`), so it works against Apache Kafka too, with
//! SASL (PLAIN, SCRAM) and TLS options; the admin endpoint is not used.
//!
//! Each command is one module; `client` finds brokers and coordinators,
//! `connection` is one broker connection, `records` encodes and decodes
//! what produce and consume move.

mod client;
mod cluster;
mod connection;
mod group;
mod records;
mod topic;

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use serde_json::Value;

use super::Output;
use crate::security::sasl_client::SaslCredentials;
use client::Client;
use connection::Security;

pub use group::GroupCommand;
pub use records::{ConsumeArgs, ProduceArgs};
pub use topic::TopicCommand;

/// `gregor cluster ...`.
#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// The cluster id, the controller and every broker
    Info,
}

/// How to reach and log in to the brokers, and how to print.
#[derive(Debug, Args)]
pub struct KafkaArgs {
    /// Brokers to bootstrap from (comma-separated host:port)
    #[arg(
        long,
        short = 'b',
        global = true,
        env = "GREGOR_BOOTSTRAP",
        default_value = "127.0.0.1:9092",
        value_name = "HOST:PORT,..."
    )]
    pub bootstrap: String,
    /// SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
    #[arg(
        long,
        global = true,
        env = "GREGOR_SASL_MECHANISM",
        value_name = "MECHANISM"
    )]
    pub sasl_mechanism: Option<String>,
    /// SASL user
    #[arg(long, global = true, env = "GREGOR_SASL_USER", value_name = "NAME")]
    pub sasl_user: Option<String>,
    /// SASL password (prefer the environment variable)
    #[arg(
        long,
        global = true,
        env = "GREGOR_SASL_PASSWORD",
        hide_env_values = true,
        value_name = "PASSWORD"
    )]
    pub sasl_password: Option<String>,
    /// Connect with TLS, trusting the PEM certificates in FILE
    #[arg(long, global = true, env = "GREGOR_TLS_CA", value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// How to print answers
    #[arg(long, short = 'o', global = true, value_enum, default_value_t = Output::Text)]
    pub output: Output,
}

impl KafkaArgs {
    fn security(&self) -> Result<Security> {
        let sasl = match (&self.sasl_mechanism, &self.sasl_user, &self.sasl_password) {
            (None, None, None) => None,
            (Some(mechanism), Some(user), Some(password)) => Some(SaslCredentials {
                mechanism: mechanism.to_ascii_uppercase(),
                username: user.clone(),
                password: password.clone(),
            }),
            _ => bail!("SASL needs --sasl-mechanism, --sasl-user and --sasl-password together"),
        };
        Ok(Security {
            tls_ca: self.tls_ca.clone(),
            sasl,
        })
    }

    fn client(&self) -> Result<Client> {
        Client::connect(&self.bootstrap, self.security()?)
    }
}

/// A Kafka-protocol command.
pub enum KafkaCommand {
    Topic(TopicCommand),
    Group(GroupCommand),
    Produce(ProduceArgs),
    Consume(ConsumeArgs),
    Cluster(ClusterCommand),
}

/// Runs `command`; what it prints goes to stdout, progress to stderr.
pub fn run(command: KafkaCommand, args: &KafkaArgs) -> Result<()> {
    let mut client = args.client()?;
    match command {
        KafkaCommand::Topic(command) => topic::run(&mut client, command, args.output),
        KafkaCommand::Group(command) => group::run(&mut client, command, args.output),
        KafkaCommand::Produce(produce) => records::produce(&mut client, produce, args.output),
        KafkaCommand::Consume(consume) => records::consume(&mut client, consume, args.output),
        KafkaCommand::Cluster(ClusterCommand::Info) => cluster::info(&mut client, args.output),
    }
}

/// Kafka's name of an error code (`TOPIC_ALREADY_EXISTS`).
pub fn error_name(code: i16) -> String {
    match kafka_protocol::ResponseError::try_from_code(code) {
        None => "NONE".to_string(),
        Some(kafka_protocol::ResponseError::Unknown(code)) => format!("error {code}"),
        Some(error) => {
            let mut name = String::new();
            for (i, c) in format!("{error:?}").chars().enumerate() {
                if c.is_ascii_uppercase() && i > 0 {
                    name.push('_');
                }
                name.push(c.to_ascii_uppercase());
            }
            name
        }
    }
}

/// Prints `value` as one JSON line, or as `text` made from it.
fn print(output: Output, value: &Value, text: impl FnOnce(&Value) -> String) {
    match output {
        Output::Json => println!("{value}"),
        Output::Text => print!("{}", text(value)),
    }
}

/// Rows under headers, each column as wide as its widest cell.
fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let widths: Vec<usize> = headers
        .iter()
        .enumerate()
        .map(|(i, header)| {
            rows.iter()
                .filter_map(|row| row.get(i))
                .map(|cell| cell.chars().count())
                .chain([header.len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    let mut out = line(headers.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// A table of the JSON array `rows`, each row's cells made by `cells`.
fn rows_text(headers: &[&str], rows: &Value, cells: impl Fn(&Value) -> Vec<String>) -> String {
    let rows: Vec<Vec<String>> = rows.as_array().into_iter().flatten().map(cells).collect();
    table(headers, &rows)
}

/// A JSON value as a cell: strings bare, null as `-`.
fn text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => "-".to_string(),
        other => other.to_string(),
    }
}

/// An error when any of `codes` is one (the exit code then says so).
fn failed_if_any(codes: &[i16]) -> Result<()> {
    match codes.iter().find(|&&code| code != 0) {
        Some(&code) => bail!("the broker answered {}", error_name(code)),
        None => Ok(()),
    }
}

/// A `KEY=VALUE` option.
fn key_value(pair: &str) -> Result<(String, String)> {
    match pair.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok((key.trim().to_string(), value.to_string()))
        }
        _ => bail!("expected KEY=VALUE, got {pair:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_names_are_kafkas() {
        assert_eq!(error_name(36), "TOPIC_ALREADY_EXISTS");
        assert_eq!(error_name(3), "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(error_name(0), "NONE");
    }

    #[test]
    fn tables_align() {
        let rows = vec![vec!["orders".to_string(), "3".to_string()]];
        assert_eq!(
            table(&["TOPIC", "PARTITIONS"], &rows),
            "TOPIC   PARTITIONS\norders  3\n"
        );
        assert!(key_value("a=b=c").is_ok_and(|(k, v)| k == "a" && v == "b=c"));
        assert!(key_value("=x").is_err());
    }
}
