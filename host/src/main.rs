//! The `gregor` binary: the command line of the `gregor` library.
//!
//! `gregor serve [--config server.properties] [--set key=value]...` starts
//! the broker: it opens storage, loads every module of the plugin
//! directory, binds the listeners and serves until SIGTERM or Ctrl-C, then
//! drains in-flight requests and flushes the logs.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use tracing::error;

use gregor::config::BrokerConfig;
use gregor::{cli, runtime_loggers, security, server};

const USAGE: &str = "usage: gregor serve [--config FILE] [--set key=value]...
       gregor plugins list | load FILE [--name NAME] | unload NAME [--admin HOST:PORT]
       gregor users list | add NAME --password PASSWORD [--mechanism M] [--iterations N] | delete NAME [--admin HOST:PORT]
       gregor authorizer show | use NAME|none [--admin HOST:PORT]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if matches!(
        args.first().map(String::as_str),
        Some("users" | "authorizer")
    ) {
        return match cli::run_security(&args[0], &args[1..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("gregor: {error:#}");
                ExitCode::FAILURE
            }
        };
    }
    if args.first().map(String::as_str) == Some("plugins") {
        return match cli::run(&args[1..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("gregor: {error:#}");
                ExitCode::FAILURE
            }
        };
    }
    let config = match parse_args(&args) {
        Ok(Some(config)) => config,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            eprintln!("gregor: {error:#}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    runtime_loggers::init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("gregor: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(server::serve(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            error!("gregor failed: {error:#}");
            eprintln!("gregor: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn parse_args(args: &[String]) -> Result<Option<BrokerConfig>> {
    let mut iter = args.iter();
    match iter.next().map(String::as_str) {
        Some("serve") => {}
        Some("--help" | "-h" | "help") | None => return Ok(None),
        Some(other) => bail!("unknown command {other:?}"),
    }
    let mut file: Option<PathBuf> = None;
    let mut overrides = Vec::new();
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "--config" => file = Some(PathBuf::from(iter.next().context("--config needs a file")?)),
            "--set" => overrides.push(iter.next().context("--set needs key=value")?.clone()),
            other => bail!("unknown argument {other:?}"),
        }
    }
    let mut config = match file {
        Some(path) => BrokerConfig::from_file(&path)?,
        None => BrokerConfig::default(),
    };
    for pair in overrides {
        config.set_pair(&pair)?;
    }
    config.validate()?;
    security::settings::validate(&config)?;
    Ok(Some(config))
}
