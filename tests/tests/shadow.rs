//! Shadow rollouts with real clients: a new version of Produce runs on
//! copies of live requests with its writes dry-run. A version with a
//! deliberately changed error code is caught field by field (counted in
//! /metrics, sampled into the log) while clients only ever see the serving
//! version's answers; a shadow of the real Produce appends nothing.

use std::time::Duration;

use gregor_tests::kafka::{self, Isolation};
use gregor_tests::{plugin_dir, wait_for, Broker};
use serde_json::Value;

fn start() -> (tempfile::TempDir, Broker, String) {
    let plugins = gregor_tests::private_plugin_dir("gregor-shadow-");
    let dir = plugins.path().display().to_string();
    let (broker, admin) = gregor_tests::start_with_admin(&[
        ("plugin.dir", dir.as_str()),
        // Log every differing response, not every hundredth.
        ("plugin.shadow.log.every", "1"),
    ]);
    (plugins, broker, admin)
}

fn cli(admin: &str, args: &[&str]) -> (bool, String) {
    gregor_tests::gregor_cli(&[&["plugins"], args].concat(), admin)
}

fn plugins(admin: &str, args: &[&str]) -> String {
    let (ok, text) = cli(admin, args);
    assert!(ok, "gregor plugins {args:?} failed: {text}");
    text
}

/// The active shadow of `module`.
fn shadow_status(admin: &str, module: &str) -> Option<Value> {
    let text = plugins(admin, &["rollouts", "--output", "json"]);
    let status: Value = serde_json::from_str(text.lines().next().unwrap_or_default())
        .unwrap_or_else(|e| panic!("rollouts is not JSON ({e}): {text}"));
    status["active"]
        .as_array()?
        .iter()
        .find(|rollout| rollout["module"] == module && rollout["mode"] == "shadow")
        .cloned()
}

/// The value of the first `/metrics` line starting with `prefix` and
/// containing `part`.
fn metric(admin: &str, prefix: &str, part: &str) -> Option<f64> {
    gregor_tests::scrape_metrics(admin)
        .lines()
        .find(|line| line.starts_with(prefix) && line.contains(part))
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
}

fn values(n: usize, tag: &str) -> Vec<String> {
    (0..n).map(|i| format!("{tag}-{i}")).collect()
}

/// Produces `values` one request each (linger 0), so every record is a
/// request the shadow mirrors.
async fn produce_each(broker: &Broker, topic: &str, values: &[String]) {
    let producer = kafka::producer(broker, &[("linger.ms", "0")]);
    for value in values {
        kafka::send_values(&producer, topic, 1, std::slice::from_ref(value)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_error_code_is_caught_and_never_reaches_clients() {
    let (_plugins, broker, admin) = start();
    let topic = "shadow-caught";
    kafka::create_topic(&broker, topic, 1).await;
    // A Produce that answers NOT_ENOUGH_REPLICAS where the serving one
    // succeeds: only the comparison may notice.
    let changed = gregor_tests::example_module("produce_unready");
    let answer = plugins(
        &admin,
        &[
            "shadow",
            &changed.display().to_string(),
            "--name",
            "produce",
        ],
    );
    assert!(answer.contains("writes dry-run"), "{answer}");

    let sent = values(20, "caught");
    // Every delivery succeeds: clients get the serving version's answers.
    produce_each(&broker, topic, &sent).await;
    let read = kafka::read_values(
        &broker,
        topic,
        1,
        Isolation::ReadUncommitted,
        20,
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(read[&0], sent);

    let field = "responses[].partition_responses[].error_code";
    let differences = wait_for(
        "the shadow's differences to be counted",
        Duration::from_secs(30),
        || {
            metric(
                &admin,
                "gregor_plugin_shadow_differences_total{",
                &format!("field=\"{field}\""),
            )
            .filter(|count| *count > 0.0)
        },
    );
    assert!(differences > 0.0);
    let status = shadow_status(&admin, "produce").expect("the shadow is running");
    assert!(
        status["shadow"]["mismatches"].as_u64().unwrap_or(0) > 0,
        "{status}"
    );
    let logged = broker.log_tail(400);
    let line = logged
        .lines()
        .find(|line| line.contains("shadow response differs"))
        .unwrap_or_else(|| panic!("no sampled difference in the log:\n{logged}"));
    assert!(
        line.contains("responses[0].partition_responses[0].error_code: serving 0 / shadow 19"),
        "{line}"
    );
    // The shadow's error codes count for its version only, not for the API.
    assert_eq!(
        metric(&admin, "gregor_response_errors_total{", "code=\"19\""),
        None,
        "a shadow's errors reached the API's error counts"
    );
    plugins(&admin, &["rollback", "produce"]);
    assert!(shadow_status(&admin, "produce").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_produce_appends_nothing_and_matches() {
    let (_plugins, broker, admin) = start();
    let topic = "shadow-dry";
    kafka::create_topic(&broker, topic, 1).await;
    // The real Produce as its own shadow: every append it makes is dry.
    let versions = tempfile::tempdir().expect("dir");
    let copy = versions.path().join("produce.wasm");
    std::fs::copy(plugin_dir().join("produce.wasm"), &copy).expect("copy produce");
    plugins(&admin, &["shadow", &copy.display().to_string()]);

    let sent = values(30, "dry");
    produce_each(&broker, topic, &sent).await;
    let compared = wait_for(
        "the shadow to compare what was produced",
        Duration::from_secs(30),
        || {
            let status = shadow_status(&admin, "produce")?;
            let compared = status["shadow"]["compared"].as_u64()?;
            (compared >= 10).then_some(status)
        },
    );
    assert_eq!(
        compared["shadow"]["mismatches"], 0,
        "a dry-run append answers as the real one (offsets aside): {compared}"
    );
    // Nothing the shadow appended is visible: exactly what was sent.
    let end = kafka::end_offsets(&broker, topic, 1, Isolation::ReadUncommitted);
    assert_eq!(end, vec![30], "the shadow appended records");
    let read = kafka::read_values(
        &broker,
        topic,
        1,
        Isolation::ReadUncommitted,
        30,
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(read[&0], sent);

    // A module whose writes have no dry-run variant cannot shadow.
    let join = versions.path().join("join_group.wasm");
    std::fs::copy(plugin_dir().join("join_group.wasm"), &join).expect("copy join_group");
    let (ok, refusal) = cli(&admin, &["shadow", &join.display().to_string()]);
    assert!(!ok, "join_group was accepted as a shadow: {refusal}");
    assert!(refusal.contains("groups.write"), "{refusal}");
}
