//! The `gregor` binary: the command line of the `gregor` library (its
//! options and help are `cli.rs`).
//!
//! `gregor serve [--config server.properties] [--set key=value]...` starts
//! the broker: it opens storage, loads every module of the plugin
//! directory, binds the listeners and serves until SIGTERM or Ctrl-C, then
//! drains in-flight requests and flushes the logs. `gregor plugins`,
//! `users` and `authorizer` talk to a running broker's admin endpoint.

use std::process::ExitCode;

use anyhow::Result;
use clap::{CommandFactory, Parser};
use tracing::error;

use gregor::cli::{self, Cli, Command, ServeArgs};
use gregor::config::BrokerConfig;
use gregor::{admin, runtime_loggers, security, server};

fn main() -> ExitCode {
    let command = match Cli::parse().command {
        Some(command) => command,
        None => {
            let _ = Cli::command().print_help();
            return ExitCode::SUCCESS;
        }
    };
    let args = match command {
        Command::Serve(args) => args,
        admin_command => {
            return match cli::run_admin(admin_command) {
                Ok(()) => ExitCode::SUCCESS,
                Err(failure) => {
                    eprintln!("gregor: {failure}");
                    cli::exit_code(&failure)
                }
            }
        }
    };
    let config = match broker_config(&args) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("gregor: {error:#}");
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

/// The file, then the overrides; checked before anything starts.
fn broker_config(args: &ServeArgs) -> Result<BrokerConfig> {
    let mut config = match &args.config {
        Some(path) => BrokerConfig::from_file(path)?,
        None => BrokerConfig::default(),
    };
    for pair in &args.overrides {
        config.set_pair(pair)?;
    }
    config.validate()?;
    security::settings::validate(&config)?;
    admin::EndpointSettings::from_config(&config, false)?;
    Ok(config)
}
