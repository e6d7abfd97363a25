//! The `gregor` command line (clap): `gregor serve` starts a broker (run
//! by `main.rs`); `gregor plugins|users|authorizer ...` are the command-line
//! face of a running broker's admin endpoint (`client.rs` speaks to it,
//! `output.rs` prints what it answers).
//!
//! Exit codes: 0 done; 1 the endpoint refused the request or a local
//! error; 2 a usage error; 3 authentication or authorization refused
//! (HTTP 401/403); 4 the endpoint could not be reached.

mod client;
mod output;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand, ValueEnum};
use serde_json::json;

pub use client::percent_encode;
use client::{AdminClient, Credentials, Failure};

#[derive(Debug, Parser)]
#[command(
    name = "gregor",
    version,
    about = "A Kafka-compatible broker whose request handlers are WebAssembly components",
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start the broker: open storage, load the plugin directory, bind the
    /// listeners, serve until SIGTERM or Ctrl-C
    Serve(ServeArgs),
    /// List, upload or unload plugin modules of a running broker
    Plugins {
        #[command(subcommand)]
        command: PluginsCommand,
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Manage the SCRAM credentials of a running broker
    Users {
        #[command(subcommand)]
        command: UsersCommand,
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Show or switch the authorizer module of a running broker
    Authorizer {
        #[command(subcommand)]
        command: AuthorizerCommand,
        #[command(flatten)]
        admin: AdminArgs,
    },
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// A server.properties file (key=value lines)
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Set one property, after the file (repeatable)
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub enum PluginsCommand {
    /// Loaded handlers and authorizers, and refused files
    List,
    /// Upload a module: validated, written into plugin.dir, swapped in
    Load {
        /// The .wasm component
        file: PathBuf,
        /// The module name (default: the file's stem)
        #[arg(long)]
        name: Option<String>,
    },
    /// Remove a module's file and unload it
    Unload {
        /// The module name
        name: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum UsersCommand {
    /// Users with SCRAM credentials (mechanisms and iterations, never secrets)
    List,
    /// Set a user's SCRAM credentials (both mechanisms unless --mechanism)
    Add {
        name: String,
        /// The user's new password
        #[arg(long)]
        password: String,
        /// SCRAM-SHA-256 or SCRAM-SHA-512 (repeatable)
        #[arg(long = "mechanism", value_name = "MECHANISM")]
        mechanisms: Vec<String>,
        /// PBKDF2 iterations (default 4096)
        #[arg(long)]
        iterations: Option<u32>,
    },
    /// Remove every credential of a user
    Delete { name: String },
}

#[derive(Debug, Subcommand)]
pub enum AuthorizerCommand {
    /// The active authorizer and the loaded ones
    Show,
    /// Switch the authorizer live (a loaded authorizer module, or none)
    Use {
        /// The module name, or `none` to allow everything
        name: String,
    },
}

/// How to reach and authenticate to the admin endpoint, and how to print.
#[derive(Debug, Args)]
pub struct AdminArgs {
    /// The admin endpoint
    #[arg(
        long,
        global = true,
        env = "GREGOR_ADMIN",
        default_value = "127.0.0.1:9644",
        value_name = "HOST:PORT"
    )]
    pub admin: String,
    /// HTTP basic user (a SCRAM user of the broker), NAME or NAME:PASSWORD
    #[arg(long, global = true, env = "GREGOR_ADMIN_USER", value_name = "NAME")]
    pub user: Option<String>,
    /// The basic user's password (prefer the environment variable)
    #[arg(
        long = "admin-password",
        global = true,
        env = "GREGOR_ADMIN_PASSWORD",
        hide_env_values = true,
        value_name = "PASSWORD"
    )]
    pub admin_password: Option<String>,
    /// A bearer token (the broker's admin.auth.token.file)
    #[arg(
        long,
        global = true,
        env = "GREGOR_ADMIN_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,
    /// A file holding the bearer token
    #[arg(
        long = "token-file",
        global = true,
        env = "GREGOR_ADMIN_TOKEN_FILE",
        value_name = "FILE"
    )]
    pub token_file: Option<PathBuf>,
    /// How to print what the endpoint answers
    #[arg(long, short = 'o', global = true, value_enum, default_value_t = Output::Text)]
    pub output: Output,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Tables and messages for people
    Text,
    /// The endpoint's JSON, one document per line
    Json,
}

/// The exit code of a failed command.
pub fn exit_code(failure: &Failure) -> ExitCode {
    ExitCode::from(match failure {
        Failure::Refused { status, .. } if matches!(*status, 401 | 403) => 3,
        Failure::Unreachable(_) => 4,
        _ => 1,
    })
}

/// Runs an admin command against a running broker; prints what it answers.
pub fn run_admin(command: Command) -> Result<(), Failure> {
    let (admin, call) = match command {
        Command::Serve(_) => {
            return Err(Failure::Local(anyhow::anyhow!(
                "serve is not an admin command"
            )))
        }
        Command::Plugins { command, admin } => (admin, plugins_call(command)?),
        Command::Users { command, admin } => (admin, users_call(command)),
        Command::Authorizer { command, admin } => (admin, authorizer_call(command)),
    };
    let client = AdminClient::new(&admin.admin, credentials(&admin)?);
    let body = match &call.body {
        Body::None => client.request(call.method, &call.path, None)?,
        Body::Text(text) => client.request(call.method, &call.path, Some(text.as_bytes()))?,
        Body::File(path) => client.upload(&call.path, path)?,
    };
    output::print(call.view, admin.output, &body).map_err(Failure::Local)
}

/// One request to the endpoint and how its answer is shown.
struct Call {
    method: &'static str,
    path: String,
    body: Body,
    view: output::View,
}

enum Body {
    None,
    Text(String),
    File(PathBuf),
}

fn plugins_call(command: PluginsCommand) -> Result<Call, Failure> {
    Ok(match command {
        PluginsCommand::List => Call {
            method: "GET",
            path: "/plugins".into(),
            body: Body::None,
            view: output::View::Plugins,
        },
        PluginsCommand::Load { file, name } => {
            let name = match name {
                Some(name) => name,
                None => module_name(&file).map_err(Failure::Local)?,
            };
            Call {
                method: "PUT",
                path: format!("/plugins/{}", percent_encode(&name)),
                body: Body::File(file),
                view: output::View::Result,
            }
        }
        PluginsCommand::Unload { name } => Call {
            method: "DELETE",
            path: format!("/plugins/{}", percent_encode(&name)),
            body: Body::None,
            view: output::View::Result,
        },
    })
}

fn module_name(file: &Path) -> anyhow::Result<String> {
    file.file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .context("cannot derive a module name from the file; use --name")
}

fn users_call(command: UsersCommand) -> Call {
    match command {
        UsersCommand::List => Call {
            method: "GET",
            path: "/users".into(),
            body: Body::None,
            view: output::View::Users,
        },
        UsersCommand::Add {
            name,
            password,
            mechanisms,
            iterations,
        } => {
            let mut body = json!({ "password": password });
            if !mechanisms.is_empty() {
                body["mechanisms"] = json!(mechanisms);
            }
            if let Some(iterations) = iterations {
                body["iterations"] = json!(iterations);
            }
            Call {
                method: "PUT",
                path: format!("/users/{}", percent_encode(&name)),
                body: Body::Text(body.to_string()),
                view: output::View::Result,
            }
        }
        UsersCommand::Delete { name } => Call {
            method: "DELETE",
            path: format!("/users/{}", percent_encode(&name)),
            body: Body::None,
            view: output::View::Result,
        },
    }
}

fn authorizer_call(command: AuthorizerCommand) -> Call {
    match command {
        AuthorizerCommand::Show => Call {
            method: "GET",
            path: "/authorizer".into(),
            body: Body::None,
            view: output::View::Authorizer,
        },
        AuthorizerCommand::Use { name } => Call {
            method: "PUT",
            path: "/authorizer".into(),
            body: Body::Text(name),
            view: output::View::Result,
        },
    }
}

/// The credentials the options and environment give.
fn credentials(admin: &AdminArgs) -> Result<Credentials, Failure> {
    let token = match (&admin.token, &admin.token_file) {
        (Some(token), _) => Some(token.trim().to_string()),
        (None, Some(path)) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("reading the token file {}", path.display()))
                .map_err(Failure::Local)?
                .trim()
                .to_string(),
        ),
        (None, None) => None,
    };
    match (token, &admin.user) {
        (Some(_), Some(_)) => Err(Failure::Local(anyhow::anyhow!(
            "give either --user or --token (--token-file), not both"
        ))),
        (Some(token), None) => Ok(Credentials::Token(token)),
        (None, Some(user)) => {
            let (user, password) = match (user.split_once(':'), &admin.admin_password) {
                (Some((user, password)), _) => (user.to_string(), password.to_string()),
                (None, Some(password)) => (user.clone(), password.clone()),
                (None, None) => {
                    return Err(Failure::Local(anyhow::anyhow!(
                        "--user {user} needs a password: --user {user}:PASSWORD, \
                         --admin-password or GREGOR_ADMIN_PASSWORD"
                    )))
                }
            };
            Ok(Credentials::Basic { user, password })
        }
        (None, None) => Ok(Credentials::None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn admin_options_come_after_the_command() {
        let cli = Cli::try_parse_from([
            "gregor", "plugins", "load", "x.wasm", "--name", "y", "--admin", "h:1", "-o", "json",
        ])
        .unwrap();
        let Some(Command::Plugins { command, admin }) = cli.command else {
            panic!("not plugins");
        };
        assert!(matches!(command, PluginsCommand::Load { name: Some(n), .. } if n == "y"));
        assert_eq!(admin.admin, "h:1");
        assert_eq!(admin.output, Output::Json);
        assert!(Cli::try_parse_from(["gregor", "users", "add", "bob"]).is_err());
        // The new user's password and the admin's are different options.
        let cli = Cli::try_parse_from([
            "gregor",
            "users",
            "add",
            "bob",
            "--password",
            "new",
            "--user",
            "ops",
            "--admin-password",
            "old",
        ])
        .unwrap();
        let Some(Command::Users { command, admin }) = cli.command else {
            panic!("not users");
        };
        assert!(matches!(command, UsersCommand::Add { password, .. } if password == "new"));
        assert_eq!(admin.admin_password.as_deref(), Some("old"));
    }

    #[test]
    fn credentials_from_options() {
        let parse = |args: &[&str]| {
            let cli = Cli::try_parse_from([&["gregor", "users", "list"], args].concat()).unwrap();
            let Some(Command::Users { admin, .. }) = cli.command else {
                panic!("not users");
            };
            credentials(&admin)
        };
        assert!(matches!(
            parse(&["--user", "ops:pw"]),
            Ok(Credentials::Basic { user, password }) if user == "ops" && password == "pw"
        ));
        assert!(matches!(
            parse(&["--token", " t0k "]),
            Ok(Credentials::Token(token)) if token == "t0k"
        ));
        assert!(parse(&["--user", "ops", "--token", "t"]).is_err());
    }
}
