//! What the CLI prints: the endpoint's JSON as it came (`--output json`,
//! one line), or tables and messages for people (`--output text`). Each
//! table is a list of columns, so adding one is one line in its list.

use anyhow::{Context, Result};
use serde_json::Value;

use super::Output;

/// What kind of answer a command gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// `{"result": "..."}`: the message.
    Result,
    /// `GET /plugins`.
    Plugins,
    /// `GET /users`.
    Users,
    /// `GET /authorizer`.
    Authorizer,
    /// `GET /rollouts`.
    Rollouts,
}

/// `gregor plugins rollouts`: the versions of each rollout in progress.
const ROLLOUT_COLUMNS: &[Column] = &[
    ("MODULE", |r| text(&r["module"])),
    ("MODE", |r| text(&r["mode"])),
    ("SERVING", |r| text(&r["serving"]["version"])),
    ("NEW", |r| text(&r["candidate"]["version"])),
    ("SHARE", |r| match r["selector"]["percent"].as_u64() {
        Some(percent) => format!("{percent}%"),
        None => "copy".to_string(),
    }),
    ("CALLS(S/N)", |r| {
        format!(
            "{}/{}",
            text(&r["serving"]["total"]["calls"]),
            text(&r["candidate"]["total"]["calls"])
        )
    }),
    ("TRAPS(N)", |r| text(&r["candidate"]["total"]["traps"])),
    ("ERRORS(S/N)", |r| {
        format!(
            "{}/{}",
            text(&r["serving"]["total"]["error_responses"]),
            text(&r["candidate"]["total"]["error_responses"])
        )
    }),
    ("DIFFERING", |r| text(&r["shadow"]["mismatches"])),
];

/// The last ended rollouts.
const ENDED_COLUMNS: &[Column] = &[
    ("ENDED", |r| text(&r["module"])),
    ("MODE", |r| text(&r["mode"])),
    ("VERSION", |r| text(&r["version"])),
    ("OUTCOME", |r| text(&r["outcome"])),
    ("REASON", |r| text(&r["reason"])),
];

/// A table column: its header and how a row's cell is made.
type Column = (&'static str, fn(&Value) -> String);

/// `gregor plugins list`: the handlers.
const HANDLER_COLUMNS: &[Column] = &[
    ("HANDLER", |h| text(&h["name"])),
    ("API_KEY", |h| text(&h["api_key"])),
    ("API", |h| text(&h["api"])),
    ("VERSIONS", |h| {
        format!("{}-{}", text(&h["min_version"]), text(&h["max_version"]))
    }),
    ("CALLS", |h| text(&h["calls"])),
    ("ERRORS", |h| text(&h["errors"])),
    ("SHA256", |h| short_hash(&h["sha256"])),
    ("GRANTS", |h| names(&h["grants"]["granted"])),
];

/// `gregor plugins list`: the authorizers.
const AUTHORIZER_COLUMNS: &[Column] = &[
    ("AUTHORIZER", |a| text(&a["name"])),
    ("ACTIVE", |a| text(&a["active"])),
    ("CALLS", |a| text(&a["calls"])),
    ("ERRORS", |a| text(&a["errors"])),
    ("SHA256", |a| short_hash(&a["sha256"])),
];

/// `gregor plugins list`: the interceptors, the ApiKeys they say they wrap
/// and those whose configured chain they are in.
const INTERCEPTOR_COLUMNS: &[Column] = &[
    ("INTERCEPTOR", |i| text(&i["name"])),
    ("API_KEYS", |i| names(&i["api_keys"])),
    ("WRAPPING", |i| names(&i["wrapping"])),
    ("CALLS", |i| text(&i["calls"])),
    ("ERRORS", |i| text(&i["errors"])),
    ("SHA256", |i| short_hash(&i["sha256"])),
    ("GRANTS", |i| names(&i["grants"]["granted"])),
];

/// `gregor plugins list`: files the loader refused.
const REFUSED_COLUMNS: &[Column] = &[
    ("REFUSED", |r| text(&r["file"])),
    ("REASON", |r| text(&r["reason"])),
];

/// `gregor users list`.
const USER_COLUMNS: &[Column] = &[
    ("USER", |u| text(&u["name"])),
    ("CREDENTIALS", |u| {
        u["credentials"]
            .as_array()
            .map(|credentials| {
                credentials
                    .iter()
                    .map(|c| {
                        format!(
                            "{} ({} iterations)",
                            text(&c["mechanism"]),
                            text(&c["iterations"])
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default()
    }),
];

/// Prints an answer's body as `output` asks.
pub fn print(view: View, output: Output, body: &str) -> Result<()> {
    if output == Output::Json {
        println!("{}", body.trim());
        return Ok(());
    }
    let value: Value = serde_json::from_str(body).with_context(|| {
        format!("the admin endpoint answered something other than JSON: {body}")
    })?;
    print!("{}", render(view, &value));
    Ok(())
}

/// The text form of an answer.
fn render(view: View, value: &Value) -> String {
    match view {
        View::Result => format!("{}\n", text(&value["result"])),
        View::Plugins => {
            let mut out = table(HANDLER_COLUMNS, &value["handlers"]);
            for (columns, rows) in [
                (AUTHORIZER_COLUMNS, &value["authorizers"]),
                (INTERCEPTOR_COLUMNS, &value["interceptors"]),
                (REFUSED_COLUMNS, &value["refused"]),
            ] {
                if rows.as_array().is_some_and(|rows| !rows.is_empty()) {
                    out.push('\n');
                    out.push_str(&table(columns, rows));
                }
            }
            out
        }
        View::Users => table(USER_COLUMNS, &value["users"]),
        View::Rollouts => {
            let mut out = table(ROLLOUT_COLUMNS, &value["active"]);
            if value["ended"]
                .as_array()
                .is_some_and(|rows| !rows.is_empty())
            {
                out.push('\n');
                out.push_str(&table(ENDED_COLUMNS, &value["ended"]));
            }
            out
        }
        View::Authorizer => {
            let active = value["active"].as_str().unwrap_or("none");
            let loaded = value["loaded"]
                .as_array()
                .map(|names| names.iter().map(text).collect::<Vec<_>>().join(", "))
                .unwrap_or_default();
            format!(
                "active: {active}\nloaded: {loaded}\ndecision cache: {} hits, {} misses\n",
                text(&value["cache_hits"]),
                text(&value["cache_misses"])
            )
        }
    }
}

/// Rows under headers, each column as wide as its widest cell.
fn table(columns: &[Column], rows: &Value) -> String {
    let rows = rows.as_array().map(Vec::as_slice).unwrap_or_default();
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|row| columns.iter().map(|(_, cell)| cell(row)).collect())
        .collect();
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, (header, _))| {
            cells
                .iter()
                .map(|row| row[i].chars().count())
                .chain([header.len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |values: Vec<&str>| {
        let padded: Vec<String> = values
            .iter()
            .zip(&widths)
            .map(|(value, width)| format!("{value:<width$}"))
            .collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    let mut out = line(columns.iter().map(|(header, _)| *header).collect());
    for row in &cells {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// A JSON value as a cell: strings bare, null as `-`.
fn text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => "-".to_string(),
        other => other.to_string(),
    }
}

/// A list of names as one cell (`-` when absent or empty).
fn names(value: &Value) -> String {
    let names: Vec<String> = value
        .as_array()
        .map_or_else(Vec::new, |names| names.iter().map(text).collect());
    if names.is_empty() {
        "-".to_string()
    } else {
        names.join(",")
    }
}

/// The first 12 hex digits of a content hash.
fn short_hash(value: &Value) -> String {
    text(value).chars().take(12).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plugin_tables_align_and_skip_empty_sections() {
        let status = json!({
            "handlers": [
                {"name": "produce", "api_key": 0, "api": "Produce", "min_version": 3,
                 "max_version": 11, "calls": 12, "errors": 0, "sha256": "0123456789abcdef"},
                {"name": "api_versions", "api_key": 18, "api": "ApiVersions", "min_version": 0,
                 "max_version": 4, "calls": 3, "errors": 1, "sha256": "fedcba9876543210"}
            ],
            "authorizers": [],
            "refused": [{"file": "/p/bad.wasm", "reason": "compiling: nope"}]
        });
        let text = render(View::Plugins, &status);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "HANDLER       API_KEY  API          VERSIONS  CALLS  ERRORS  SHA256        GRANTS"
        );
        assert_eq!(
            lines[1],
            "produce       0        Produce      3-11      12     0       0123456789ab  -"
        );
        assert!(!text.contains("AUTHORIZER"), "{text}");
        assert_eq!(lines[4], "REFUSED      REASON");
        assert_eq!(lines[5], "/p/bad.wasm  compiling: nope");
    }

    #[test]
    fn results_users_and_the_authorizer() {
        assert_eq!(
            render(View::Result, &json!({"result": "loaded x"})),
            "loaded x\n"
        );
        let users = json!({"users": [{"name": "carol", "credentials": [
            {"mechanism": "SCRAM-SHA-512", "iterations": 4096}]}]});
        assert_eq!(
            render(View::Users, &users),
            "USER   CREDENTIALS\ncarol  SCRAM-SHA-512 (4096 iterations)\n"
        );
        let authorizer = json!({"active": null, "loaded": ["authorizer_acl"],
            "cache_hits": 1, "cache_misses": 2});
        assert!(render(View::Authorizer, &authorizer)
            .starts_with("active: none\nloaded: authorizer_acl\n"));
    }
}
