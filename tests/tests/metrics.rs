//! The Prometheus endpoint after real client traffic: requests are counted
//! per API, bytes in match what reached the log, a trapping plugin is
//! counted, and the request-phase histograms fill.

use std::path::Path;
use std::time::Duration;

use gregor_tests::wire::{request_frame, Conn};
use gregor_tests::{free_port, kafka, metric_sample as sample, workspace_root, Broker};
use rdkafka::consumer::Consumer;
use rdkafka::producer::FutureRecord;

fn scrape(admin: &str) -> String {
    gregor_tests::scrape_metrics(admin)
}

/// Total size of a partition's `.log` segment files.
fn log_bytes(partition_dir: &Path) -> u64 {
    std::fs::read_dir(partition_dir)
        .map(|entries| {
            entries
                .filter_map(|entry| entry.ok())
                .filter(|entry| entry.path().extension().is_some_and(|ext| ext == "log"))
                .filter_map(|entry| entry.metadata().ok())
                .map(|meta| meta.len())
                .sum()
        })
        .unwrap_or(0)
}

fn find_partition_dir(root: &Path, name: &str) -> Option<std::path::PathBuf> {
    for entry in std::fs::read_dir(root).ok()?.filter_map(|e| e.ok()) {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == name) {
                return Some(path);
            }
            if let Some(found) = find_partition_dir(&path, name) {
                return Some(found);
            }
        }
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_move_with_real_client_traffic() {
    let admin = format!("127.0.0.1:{}", free_port());
    let plugins = tempfile::tempdir().expect("plugin dir");
    for entry in std::fs::read_dir(gregor_tests::plugin_dir()).expect("plugins") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|ext| ext == "wasm") {
            std::fs::copy(&path, plugins.path().join(path.file_name().expect("name")))
                .expect("copy");
        }
    }
    let examples = std::env::var_os("GREGOR_EXAMPLE_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("build/examples"));
    std::fs::copy(
        examples.join("chaos.wasm"),
        plugins.path().join("chaos.wasm"),
    )
    .expect("copy chaos");
    let plugin_path = plugins.path().display().to_string();
    let broker = Broker::start_with(&[
        ("admin.listener", admin.as_str()),
        ("plugin.dir", plugin_path.as_str()),
    ]);

    kafka::create_topic(&broker, "metered", 1).await;
    let producer = kafka::producer(&broker, &[]);
    let count = 200;
    for i in 0..count {
        let payload = format!("payload-{i:05}");
        producer
            .send(
                FutureRecord::to("metered").key("k").payload(&payload),
                Duration::from_secs(30),
            )
            .await
            .expect("produce");
    }
    let received = kafka::consume_all(&broker, "metered", 1, count, Duration::from_secs(60)).await;
    assert_eq!(received[&0].len(), count);

    // One trapping call of the chaos module (ApiKey 1099, mode 1).
    let mut conn = Conn::connect(broker.addr());
    conn.send(&request_frame(1099, 0, 5, false, &[1]))
        .expect("send");
    conn.expect_closed("chaos trap");

    // A Metadata request for a missing topic (auto-creation is off for
    // consumers) answers UNKNOWN_TOPIC_OR_PARTITION, which the module reports.
    let missing = kafka::plain_consumer(&broker)
        .fetch_metadata(Some("no-such-topic"), Duration::from_secs(30))
        .expect("metadata for a missing topic");
    assert!(missing.topics().iter().all(|t| t.error().is_some()));

    let text = scrape(&admin);
    let produce_requests: f64 = text
        .lines()
        .filter(|line| line.starts_with("gregor_requests_total{request=\"Produce\""))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(
        produce_requests >= 1.0,
        "no Produce requests counted:\n{text}"
    );
    assert!(
        text.contains("gregor_requests_total{request=\"FetchConsumer\""),
        "{text}"
    );
    assert!(
        text.contains("gregor_requests_total{request=\"Metadata\""),
        "{text}"
    );
    assert_eq!(
        sample(&text, "gregor_topic_messages_in_total{topic=\"metered\"}"),
        Some(count as f64)
    );
    let partition_dir =
        find_partition_dir(broker.data_dir(), "metered-0").expect("partition directory");
    let on_disk = log_bytes(&partition_dir);
    assert!(on_disk > 0);
    assert_eq!(
        sample(&text, "gregor_topic_bytes_in_total{topic=\"metered\"}"),
        Some(on_disk as f64),
        "bytes in must equal the bytes appended to the log"
    );
    let bytes_out =
        sample(&text, "gregor_topic_bytes_out_total{topic=\"metered\"}").expect("bytes out");
    assert!(
        bytes_out >= on_disk as f64,
        "the consumer read everything: {bytes_out} < {on_disk}"
    );
    assert_eq!(
        sample(
            &text,
            "gregor_plugin_traps_total{plugin=\"chaos\",api_key=\"1099\"}"
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "gregor_request_errors_total{request=\"Chaos\",error=\"HANDLER_FAILED\"}"
        ),
        Some(1.0)
    );
    let total_count = sample(
        &text,
        "gregor_request_total_time_ms_count{request=\"Produce\"}",
    )
    .expect("histogram");
    assert_eq!(
        total_count, produce_requests,
        "one total-time observation per Produce request"
    );
    assert!(text.contains("gregor_handler_idle_ratio "), "{text}");
    assert!(
        sample(
            &text,
            "gregor_response_errors_total{request=\"Metadata\",code=\"3\"}"
        )
        .is_some_and(|count| count >= 1.0),
        "the Metadata module reported UNKNOWN_TOPIC_OR_PARTITION:\n{text}"
    );
    assert!(
        sample(&text, "gregor_connections{listener=\"PLAINTEXT\"}").is_some_and(|open| open >= 1.0)
    );
}

/// The families kept with their millisecond names (Kafka's `*TimeMs`, and
/// what dashboards and the tests above read): promtool's only complaint
/// about /metrics is their unit abbreviation.
const MILLISECOND_FAMILIES: &[&str] = &[
    "gregor_request_queue_time_ms",
    "gregor_request_local_time_ms",
    "gregor_request_remote_time_ms",
    "gregor_request_throttle_time_ms",
    "gregor_response_queue_time_ms",
    "gregor_response_send_time_ms",
    "gregor_request_total_time_ms",
    "gregor_plugin_call_time_ms",
    "gregor_plugin_instantiate_time_ms",
];

/// `promtool check metrics` (Debian's `prometheus`) on /metrics after
/// produce and fetch traffic: the exposition parses, every family has help
/// and a type, counters end in `_total`; and every histogram's `+Inf`
/// bucket equals its `_count`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promtool_accepts_the_exposition_after_traffic() {
    use std::io::Write as _;
    use std::process::{Command, Stdio};

    let (broker, admin) = gregor_tests::start_with_admin(&[]);
    kafka::create_topic(&broker, "linted", 2).await;
    let producer = kafka::producer(&broker, &[]);
    for i in 0..50 {
        let payload = format!("record-{i}");
        producer
            .send(
                FutureRecord::to("linted").key(&payload).payload(&payload),
                Duration::from_secs(30),
            )
            .await
            .expect("produce");
    }
    let received = kafka::consume_all(&broker, "linted", 2, 50, Duration::from_secs(60)).await;
    assert_eq!(received.values().map(Vec::len).sum::<usize>(), 50);
    let missing = kafka::plain_consumer(&broker)
        .fetch_metadata(Some("not-there"), Duration::from_secs(30))
        .expect("metadata");
    assert!(missing.topics().iter().all(|t| t.error().is_some()));

    let text = scrape(&admin);
    assert!(
        sample(&text, "gregor_topic_messages_in_total{topic=\"linted\"}") == Some(50.0),
        "{text}"
    );
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus; .ci/deps.sh installs it)");
    promtool
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("feed promtool");
    let output = promtool.wait_with_output().expect("promtool");
    let report = String::from_utf8_lossy(&output.stderr).to_string()
        + &String::from_utf8_lossy(&output.stdout);
    // Exit 0: clean; 3: lint problems only (1 would be a parse failure).
    assert!(
        matches!(output.status.code(), Some(0 | 3)),
        "promtool failed ({:?}): {report}\n{text}",
        output.status
    );
    for problem in report.lines().filter(|line| !line.trim().is_empty()) {
        let (family, complaint) = problem.split_once(' ').unwrap_or((problem, ""));
        assert!(
            MILLISECOND_FAMILIES.contains(&family)
                && complaint == "metric names should not contain abbreviated units",
            "promtool: {problem}\n{text}"
        );
    }
    assert!(
        output.status.code() == Some(0) || !report.trim().is_empty(),
        "promtool exited 3 without saying why"
    );

    let mut histograms = 0;
    for line in text.lines() {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Some((family, labels)) = series.split_once("_count") else {
            continue;
        };
        if !MILLISECOND_FAMILIES.contains(&family) {
            continue;
        }
        let inf = match labels.strip_suffix('}') {
            Some(labels) => format!("{family}_bucket{labels},le=\"+Inf\"}}"),
            None => format!("{family}_bucket{{le=\"+Inf\"}}"),
        };
        let count: f64 = value.parse().expect("count");
        assert_eq!(sample(&text, &inf), Some(count), "{series} vs {inf}");
        histograms += 1;
    }
    assert!(
        histograms >= 7,
        "request-phase histograms: {histograms}\n{text}"
    );
}

/// An OpenMetrics scrape (what Prometheus asks for first) after traffic:
/// the content type says OpenMetrics 1.0, and the reference parser
/// (Python's `prometheus_client.openmetrics.parser`, strict: `# EOF`,
/// counter families without `_total`, float `le`s) reads every family,
/// with the topic's message counter at what was produced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openmetrics_when_the_scraper_asks() {
    let (broker, admin) = gregor_tests::start_with_admin(&[]);
    kafka::create_topic(&broker, "open", 1).await;
    let producer = kafka::producer(&broker, &[]);
    for i in 0..7 {
        producer
            .send(
                FutureRecord::<str, str>::to("open").payload(&format!("r{i}")),
                Duration::from_secs(30),
            )
            .await
            .expect("produce");
    }
    let accept = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5";
    let (head, body) = gregor_tests::get_metrics_accepting(&admin, Some(accept));
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/openmetrics-text; version=1.0.0"),
        "{head}"
    );
    assert!(body.ends_with("# EOF\n"), "{body}");
    let scrape_file = tempfile::NamedTempFile::new().expect("a file for the scrape");
    std::fs::write(scrape_file.path(), &body).expect("write the scrape");
    let path = scrape_file.path().display().to_string();
    let (stdout, _) = gregor_tests::run_python("openmetrics_check.py", &[&path]);
    let parsed: serde_json::Value = serde_json::from_str(stdout.trim()).expect("parser output");
    assert!(parsed["families"].as_u64() > Some(20), "{parsed}");
    assert_eq!(
        parsed["samples"]["gregor_topic_messages_in_total{topic=open}"], 7.0,
        "{parsed}"
    );
    // Plain scrapers still get Prometheus text.
    let (head, body) = gregor_tests::get_metrics(&admin);
    assert!(head.contains("text/plain"), "{head}");
    assert!(!body.contains("# EOF"));
}
