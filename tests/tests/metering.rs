//! Metering of handler and interceptor modules over the wire: what each
//! module costs (guest time, host calls per interface, bytes across the
//! boundary) grows with real requests and reads the same in `/metrics`
//! and the admin API; a tight `plugin.limits.<module>.cpu.ms.per.sec`
//! throttles that module's responses (`throttle_time_ms`, a muted
//! connection) and fails none of them, while other modules go unthrottled.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use gregor_tests::wire::{api_versions_request, request_frame, Conn, Reader};
use gregor_tests::{kafka, metric_sample as sample, start_with_admin};
use rdkafka::consumer::Consumer;
use rdkafka::producer::FutureRecord;
use serde_json::Value;

const METADATA: i16 = 3;

/// A Metadata v12 body asking for no topics: an empty compact array,
/// no auto-creation, no authorized operations, no tagged fields.
const METADATA_BODY: [u8; 4] = [1, 0, 0, 0];

/// `GET path` on the admin endpoint: the JSON body of a 200 answer.
fn admin_json(admin: &str, path: &str) -> Value {
    let mut stream = TcpStream::connect(admin).expect("connect to the admin endpoint");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    let (head, body) = response.split_once("\r\n\r\n").expect("HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "GET {path}: {head}");
    serde_json::from_str(body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"))
}

/// The `metering` of a loaded handler module in `GET /plugins`.
fn admin_metering(admin: &str, module: &str) -> Value {
    let listing = admin_json(admin, "/plugins");
    listing["handlers"]
        .as_array()
        .expect("handlers")
        .iter()
        .find(|handler| handler["name"] == module)
        .unwrap_or_else(|| panic!("no handler {module} in {listing}"))["metering"]
        .clone()
}

/// A module's series of one family (`{plugin=...,api_key=...}` labels).
fn plugin_sample(text: &str, family: &str, module: &str, api_key: i16) -> f64 {
    let series = format!("{family}{{plugin=\"{module}\",api_key=\"{api_key}\"}}");
    sample(text, &series).unwrap_or_else(|| panic!("no {series} in\n{text}"))
}

fn host_calls(text: &str, module: &str, api_key: i16, interface: &str) -> f64 {
    let series = format!(
        "gregor_plugin_host_calls_total{{plugin=\"{module}\",api_key=\"{api_key}\",interface=\"{interface}\"}}"
    );
    sample(text, &series).unwrap_or(0.0)
}

/// A Metadata v12 response (after its size): the throttle time and the
/// number of brokers it lists; the payload's length past the response
/// header is the body the module returned.
fn metadata_answer(payload: &[u8]) -> (i32, u32, usize) {
    let mut r = Reader::new(&payload[4..]);
    r.skip_tags();
    let body = r.remaining();
    let throttle = r.i32();
    let brokers = r.uvarint().saturating_sub(1);
    (throttle, brokers, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn module_costs_grow_with_requests_in_metrics_and_the_admin_api() {
    let (broker, admin) = start_with_admin(&[]);
    kafka::create_topic(&broker, "metered", 1).await;
    let count = 20;
    {
        let producer = kafka::producer(&broker, &[]);
        for i in 0..count {
            let payload = format!("record-{i:03}");
            producer
                .send(
                    FutureRecord::to("metered").key("k").payload(&payload),
                    Duration::from_secs(30),
                )
                .await
                .expect("produce");
        }
        let received =
            kafka::consume_all(&broker, "metered", 1, count, Duration::from_secs(60)).await;
        assert_eq!(received[&0].len(), count);
    }

    // Produce and Fetch, metered after real client traffic: they ran,
    // called the log, and carried at least the record bytes across.
    let text = gregor_tests::scrape_metrics(&admin);
    let record_bytes = (count * "record-000".len()) as f64;
    for (module, api_key) in [("produce", 0), ("fetch", 1)] {
        assert!(
            plugin_sample(&text, "gregor_plugin_guest_seconds_total", module, api_key) > 0.0,
            "{module} guest time\n{text}"
        );
        let calls = plugin_sample(&text, "gregor_plugin_calls_total", module, api_key);
        assert!(
            host_calls(&text, module, api_key, "log") >= calls,
            "every {module} call reads or appends the log\n{text}"
        );
    }
    // Produce takes its records by reference (issue 17): its requests
    // cross without their batches. Each of the `count` requests carried
    // one batch of one record, whose 61-byte header alone would make
    // more than this.
    let produce_in = plugin_sample(&text, "gregor_plugin_bytes_in_total", "produce", 0);
    assert!(
        produce_in > 0.0 && produce_in < (count * 61) as f64,
        "{produce_in} bytes into produce for {count} requests"
    );
    // Fetch references its record sets (DESIGN §12): only the response
    // around them leaves the guest.
    let fetch_out = plugin_sample(&text, "gregor_plugin_bytes_out_total", "fetch", 1);
    assert!(
        fetch_out > 0.0 && fetch_out < record_bytes,
        "{fetch_out} of {record_bytes}"
    );

    // Five Metadata requests on a raw connection, with no other client
    // left: the module's counters move by exactly what crossed.
    let before = gregor_tests::scrape_metrics(&admin);
    let mut conn = Conn::connect(broker.addr());
    let mut returned = 0;
    for correlation_id in 1..=5 {
        let frame = request_frame(METADATA, 12, correlation_id, true, &METADATA_BODY);
        let (throttle, brokers, body) = metadata_answer(&conn.round_trip(&frame, correlation_id));
        assert_eq!(
            (throttle, brokers),
            (0, 1),
            "an unlimited module, one broker"
        );
        returned += body;
    }
    let after = gregor_tests::scrape_metrics(&admin);
    let grew = |family: &str| {
        plugin_sample(&after, family, "metadata", METADATA)
            - plugin_sample(&before, family, "metadata", METADATA)
    };
    assert_eq!(grew("gregor_plugin_calls_total"), 5.0);
    assert_eq!(
        grew("gregor_plugin_bytes_in_total"),
        (5 * METADATA_BODY.len()) as f64
    );
    assert_eq!(grew("gregor_plugin_bytes_out_total"), returned as f64);
    assert!(grew("gregor_plugin_guest_seconds_total") > 0.0);
    assert!(
        host_calls(&after, "metadata", METADATA, "metadata")
            - host_calls(&before, "metadata", METADATA, "metadata")
            >= 5.0,
        "each Metadata call asks the metadata service\n{after}"
    );
    assert_eq!(
        plugin_sample(
            &after,
            "gregor_plugin_throttled_responses_total",
            "metadata",
            METADATA
        ),
        0.0
    );

    // The admin API reads the same totals.
    let metering = admin_metering(&admin, "metadata");
    assert_eq!(
        metering["bytes_in"].as_f64(),
        Some(plugin_sample(
            &after,
            "gregor_plugin_bytes_in_total",
            "metadata",
            METADATA
        )),
        "{metering}"
    );
    assert_eq!(
        metering["bytes_out"].as_f64(),
        Some(plugin_sample(
            &after,
            "gregor_plugin_bytes_out_total",
            "metadata",
            METADATA
        )),
        "{metering}"
    );
    assert_eq!(
        metering["host_calls"]["metadata"].as_f64(),
        Some(host_calls(&after, "metadata", METADATA, "metadata")),
        "{metering}"
    );
    assert!(metering["guest_time_us"].as_u64() > Some(0), "{metering}");
    assert!(
        metering["peak_memory_bytes"].as_u64() > Some(0),
        "{metering}"
    );
    assert_eq!(metering["cpu_limit_ms_per_sec"], Value::Null, "{metering}");
}

#[test]
fn a_tight_cpu_limit_throttles_responses_and_fails_none() {
    // Ten nanoseconds of guest time per second: any Metadata call is over.
    let (broker, admin) = start_with_admin(&[("plugin.limits.metadata.cpu.ms.per.sec", "0.00001")]);
    let mut conn = Conn::connect(broker.addr());
    let mut previous_throttle = 0;
    for correlation_id in 1..=3 {
        let frame = request_frame(METADATA, 12, correlation_id, true, &METADATA_BODY);
        let sent = Instant::now();
        let payload = conn.round_trip(&frame, correlation_id);
        let waited = sent.elapsed();
        let (throttle, brokers, _) = metadata_answer(&payload);
        assert_eq!(brokers, 1, "a complete answer, not an error");
        // At most one quota window (quota.window.size.seconds = 1).
        assert!(
            (1..=1000).contains(&throttle),
            "request {correlation_id}: throttle_time_ms {throttle}"
        );
        // The connection stayed muted for the previous response's throttle
        // before this request was read (KIP-219).
        assert!(
            waited >= Duration::from_millis(previous_throttle as u64 * 9 / 10),
            "request {correlation_id} answered after {waited:?}, the previous throttle was {previous_throttle} ms"
        );
        previous_throttle = throttle;
    }

    // Another module on the same connection is not throttled.
    let payload = conn.round_trip(&api_versions_request(3, 9), 9);
    let mut r = Reader::new(&payload[4..]);
    assert_eq!(r.i16(), 0, "ApiVersions error code");

    // A real client's Metadata still succeeds.
    let metadata = kafka::plain_consumer(&broker)
        .fetch_metadata(None, Duration::from_secs(30))
        .expect("metadata under a throttling limit");
    assert_eq!(metadata.brokers().len(), 1);

    let text = gregor_tests::scrape_metrics(&admin);
    assert!(
        plugin_sample(
            &text,
            "gregor_plugin_throttled_responses_total",
            "metadata",
            METADATA
        ) >= 3.0,
        "{text}"
    );
    assert!(
        plugin_sample(
            &text,
            "gregor_plugin_throttle_seconds_total",
            "metadata",
            METADATA
        ) > 0.0
    );
    assert_eq!(
        plugin_sample(&text, "gregor_plugin_cpu_limit_ratio", "metadata", METADATA),
        0.00001 / 1000.0
    );
    assert!(plugin_sample(&text, "gregor_plugin_cpu_ratio", "metadata", METADATA) > 0.0);
    assert_eq!(
        plugin_sample(
            &text,
            "gregor_plugin_throttled_responses_total",
            "api_versions",
            18
        ),
        0.0
    );
    assert!(
        !text
            .lines()
            .any(|line| line.starts_with("gregor_request_errors_total{request=\"Metadata\"")),
        "no Metadata request failed\n{text}"
    );
    let metering = admin_metering(&admin, "metadata");
    assert_eq!(metering["cpu_limit_ms_per_sec"].as_f64(), Some(0.00001));
    assert!(
        metering["throttled_responses"].as_u64() >= Some(3),
        "{metering}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interceptor_is_metered_like_a_handler() {
    let plugins = gregor_tests::plugin_dir_with_examples(&["json_validator"]);
    let dir = plugins.path().display().to_string();
    let (broker, admin) = start_with_admin(&[
        ("plugin.dir", dir.as_str()),
        ("plugin.interceptors.produce", "json_validator"),
        ("plugin.grants.json_validator", "metadata.read"),
        ("json.validator.topics", "metered.*"),
    ]);
    kafka::create_topic(&broker, "metered.json", 1).await;
    let producer = kafka::producer(&broker, &[]);
    for i in 0..5 {
        let payload = format!("{{\"n\":{i}}}");
        producer
            .send(
                FutureRecord::<(), _>::to("metered.json").payload(&payload),
                Duration::from_secs(30),
            )
            .await
            .expect("a JSON record is delivered");
    }

    let text = gregor_tests::scrape_metrics(&admin);
    let module = "json_validator";
    // Interceptor families carry api_key -1 (it may wrap several).
    let value = |family: &str| plugin_sample(&text, family, module, -1);
    let produced = plugin_sample(&text, "gregor_plugin_calls_total", "produce", 0);
    assert!(produced >= 5.0, "{text}");
    // Two hook calls per Produce request, none failed.
    assert_eq!(value("gregor_plugin_calls_total"), 2.0 * produced, "{text}");
    assert_eq!(value("gregor_plugin_traps_total"), 0.0);
    assert!(value("gregor_plugin_guest_seconds_total") > 0.0, "{text}");
    // The request hook takes the request and hands it on; the response
    // hook takes the request and the response and hands the response on:
    // what goes in exceeds what comes out by the requests.
    let (bytes_in, bytes_out) = (
        value("gregor_plugin_bytes_in_total"),
        value("gregor_plugin_bytes_out_total"),
    );
    assert!(
        bytes_out > 0.0 && bytes_in > bytes_out,
        "{bytes_in} in, {bytes_out} out"
    );
    // The request hook reads the validated topics from the broker config
    // (the response hook only when something was refused).
    assert!(
        host_calls(&text, module, -1, "metadata") >= produced,
        "{text}"
    );
    assert!(
        sample(
            &text,
            &format!("gregor_plugin_peak_memory_bytes{{plugin=\"{module}\"}}")
        )
        .is_some_and(|peak| peak > 0.0),
        "{text}"
    );

    // The admin API reads the same totals.
    let listing = admin_json(&admin, "/plugins");
    let metering = listing["interceptors"]
        .as_array()
        .expect("interceptors")
        .iter()
        .find(|entry| entry["name"] == module)
        .unwrap_or_else(|| panic!("no interceptor {module} in {listing}"))["metering"]
        .clone();
    assert_eq!(metering["bytes_in"].as_f64(), Some(bytes_in), "{metering}");
    assert_eq!(
        metering["bytes_out"].as_f64(),
        Some(bytes_out),
        "{metering}"
    );
    assert!(metering["guest_time_us"].as_u64() > Some(0), "{metering}");
    assert!(
        metering["peak_memory_bytes"].as_u64() > Some(0),
        "{metering}"
    );
}
