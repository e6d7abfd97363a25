//! What no well-behaved client sends, over raw TCP with hand-encoded
//! frames. Kafka's behaviour, which Gregor keeps: a frame over
//! `socket.request.max.bytes`, a negative size, garbage, an unknown ApiKey
//! or an unsupported version closes that connection (except ApiVersions,
//! which is answered with a v0 UNSUPPORTED_VERSION response listing the
//! supported APIs). Never a crash, never another client harmed: after each
//! case a connection opened before it, a fresh connection and an rdkafka
//! client all still work.

use std::net::Shutdown;

use gregor_tests::kafka::{self, CALL_TIMEOUT};
use gregor_tests::wire::{
    api_versions_request, is_closed_error, metadata_request, parse_api_versions, request_frame,
    ApiVersionsResponse, Conn, API_VERSIONS, METADATA, UNSUPPORTED_VERSION,
};
use gregor_tests::Broker;
use rdkafka::consumer::Consumer;

const MAX_REQUEST: usize = 1 << 20;

fn start() -> Broker {
    Broker::start_with(&[("socket.request.max.bytes", &MAX_REQUEST.to_string())])
}

/// A connection that has already done an ApiVersions round trip.
fn established(broker: &Broker) -> Conn {
    let mut conn = Conn::connect(broker.addr());
    conn.api_versions(1);
    conn
}

/// The highest Metadata version the broker serves that the tests can encode.
fn metadata_version(versions: &ApiVersionsResponse) -> i16 {
    let range = versions
        .range(METADATA)
        .unwrap_or_else(|| panic!("Metadata is not advertised: {versions:?}"));
    let version = range.max_version.min(12);
    assert!(
        version >= range.min_version,
        "cannot encode any advertised Metadata version: {range:?}"
    );
    version
}

/// The broker keeps serving: `existing` (opened before the bad input)
/// still answers, a fresh connection answers ApiVersions and Metadata, and
/// an rdkafka client fetches metadata naming this broker.
fn assert_still_serving(broker: &Broker, existing: &mut Conn) {
    existing.api_versions(1_001);

    let mut fresh = Conn::connect(broker.addr());
    let versions = fresh.api_versions(1_002);
    let version = metadata_version(&versions);
    let response = fresh.round_trip(&metadata_request(version, 1_003), 1_003);
    assert!(response.len() > 4, "Metadata response without a body");

    let metadata = kafka::plain_consumer(broker)
        .fetch_metadata(None, CALL_TIMEOUT)
        .expect("rdkafka metadata request after bad input");
    assert_eq!(metadata.brokers().len(), 1);
    assert_eq!(metadata.brokers()[0].port(), i32::from(broker.port()));
}

/// Sends `bytes` on a fresh connection and expects the broker to close it.
/// A failed write is fine: the broker may close before reading it all.
fn send_expect_closed(broker: &Broker, what: &str, bytes: &[u8]) {
    let mut conn = Conn::connect(broker.addr());
    if let Err(e) = conn.send(bytes) {
        assert!(is_closed_error(&e), "{what}: write failed: {e}");
    }
    conn.expect_closed(what);
}

#[test]
fn frame_over_the_size_limit_closes_the_connection() {
    let broker = start();
    let mut existing = established(&broker);

    // A valid ApiVersions header, but the size says 4 MiB; only 16 KiB
    // follow. The broker must close at once, not wait for the rest.
    let mut frame = api_versions_request(0, 7);
    frame.resize(16 << 10, 0);
    frame[..4].copy_from_slice(&(4 * MAX_REQUEST as i32).to_be_bytes());
    send_expect_closed(&broker, "4 MiB frame with a 1 MiB limit", &frame);

    // Just over the limit.
    let mut frame = api_versions_request(0, 8);
    frame[..4].copy_from_slice(&(MAX_REQUEST as i32 + 1).to_be_bytes());
    send_expect_closed(&broker, "frame one byte over the limit", &frame);

    assert_still_serving(&broker, &mut existing);
}

#[test]
fn garbage_bytes_close_the_connection() {
    let broker = start();
    let mut existing = established(&broker);

    send_expect_closed(
        &broker,
        "an HTTP request",
        b"GET / HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl\r\n\r\n",
    );

    // A sane size, then a header of 0xff bytes: ApiKey -1.
    let mut frame = 16i32.to_be_bytes().to_vec();
    frame.extend([0xff; 16]);
    send_expect_closed(&broker, "a frame of 0xff bytes", &frame);

    // A frame too short to hold a request header.
    let mut frame = 6i32.to_be_bytes().to_vec();
    frame.extend([0, 18, 0, 0, 0, 1]);
    send_expect_closed(&broker, "a 6-byte frame", &frame);

    send_expect_closed(&broker, "an empty frame", &0i32.to_be_bytes());

    // A valid header whose client id length runs past the frame.
    let mut frame = api_versions_request(0, 9);
    frame[12..14].copy_from_slice(&1000i16.to_be_bytes());
    send_expect_closed(&broker, "a client id longer than the frame", &frame);

    assert_still_serving(&broker, &mut existing);
}

#[test]
fn unknown_api_key_closes_the_connection() {
    let broker = start();
    let mut existing = established(&broker);

    send_expect_closed(
        &broker,
        "ApiKey 9999",
        &request_frame(9999, 0, 5, false, &[]),
    );
    send_expect_closed(&broker, "ApiKey -2", &request_frame(-2, 0, 6, false, &[]));

    assert_still_serving(&broker, &mut existing);
}

#[test]
fn api_versions_with_an_unsupported_version_gets_a_v0_error_response() {
    let broker = start();
    let mut existing = established(&broker);
    let max = existing
        .api_versions(2)
        .range(API_VERSIONS)
        .unwrap()
        .max_version;

    for (version, correlation_id) in [(99i16, 77i32), (max + 1, 78), (i16::MAX, 79)] {
        let mut conn = Conn::connect(broker.addr());
        conn.send(&api_versions_request(version, correlation_id))
            .expect("send ApiVersions");
        let payload = conn
            .read_frame()
            .unwrap_or_else(|e| panic!("ApiVersions v{version}: no response: {e}"));
        // Always a v0 response (header v0, no throttle time, no tags).
        let response = parse_api_versions(&payload, 0);
        assert_eq!(response.correlation_id, correlation_id, "v{version}");
        assert_eq!(
            response.error_code, UNSUPPORTED_VERSION,
            "ApiVersions v{version}: error code"
        );
        assert!(
            !response.apis.is_empty(),
            "ApiVersions v{version}: the supported list must not be empty"
        );
        let own = response
            .range(API_VERSIONS)
            .expect("ApiVersions lists itself");
        assert_eq!(own.min_version, 0);
        assert_eq!(own.max_version, max);

        // The connection stays open: the client retries with a version
        // from the list.
        let ok = conn.api_versions(correlation_id + 100);
        assert_eq!(ok.apis, response.apis, "same API list both times");
    }

    assert_still_serving(&broker, &mut existing);
}

#[test]
fn unsupported_version_of_another_api_closes_the_connection() {
    let broker = start();
    let mut existing = established(&broker);
    let versions = existing.api_versions(3);
    let max = versions
        .range(METADATA)
        .expect("Metadata advertised")
        .max_version;

    let mut frame = metadata_request(metadata_version(&versions), 10);
    frame[6..8].copy_from_slice(&99i16.to_be_bytes());
    send_expect_closed(&broker, "Metadata v99", &frame);

    frame[6..8].copy_from_slice(&(max + 1).to_be_bytes());
    send_expect_closed(&broker, "Metadata one above its max version", &frame);

    frame[6..8].copy_from_slice(&(-1i16).to_be_bytes());
    send_expect_closed(&broker, "Metadata v-1", &frame);

    assert_still_serving(&broker, &mut existing);
}

#[test]
fn negative_frame_size_closes_the_connection() {
    let broker = start();
    let mut existing = established(&broker);

    for size in [-1i32, i32::MIN] {
        let mut frame = size.to_be_bytes().to_vec();
        frame.extend(&api_versions_request(0, 11)[4..]);
        send_expect_closed(&broker, &format!("frame size {size}"), &frame);
    }

    assert_still_serving(&broker, &mut existing);
}

#[test]
fn truncated_frame_then_eof_is_harmless() {
    let broker = start();
    let mut existing = established(&broker);

    let frame = api_versions_request(0, 12);
    for cut in [2, 4, 9, frame.len() - 1] {
        let mut conn = Conn::connect(broker.addr());
        conn.send(&frame[..cut]).expect("send a partial frame");
        conn.stream
            .shutdown(Shutdown::Write)
            .expect("half-close the connection");
        // The broker sees EOF mid-frame and closes its side without answering.
        conn.expect_closed(&format!("frame cut after {cut} bytes, then EOF"));
    }

    // A complete request followed by a partial one, then EOF. Whether the
    // complete one is answered before the close is up to the broker (Kafka
    // may drop it); a response, if any, must be the right one, and the
    // connection must then be closed.
    let mut conn = Conn::connect(broker.addr());
    let mut bytes = api_versions_request(0, 13);
    bytes.extend(&frame[..7]);
    conn.send(&bytes).expect("send");
    conn.stream.shutdown(Shutdown::Write).expect("half-close");
    match conn.read_frame() {
        Ok(payload) => {
            let response = parse_api_versions(&payload, 0);
            assert_eq!((response.correlation_id, response.error_code), (13, 0));
            conn.expect_closed("partial second frame, then EOF");
        }
        Err(e) if is_closed_error(&e) => {}
        Err(e) => panic!("complete frame, partial frame, EOF: {e}"),
    }

    assert_still_serving(&broker, &mut existing);
}

/// One pipelined request and how to check its response.
#[derive(Clone, Copy, Debug)]
enum Kind {
    ApiVersionsV0,
    ApiVersionsV3,
    ApiVersionsUnsupported,
    Metadata(i16),
}

#[test]
fn pipelined_requests_are_answered_in_request_order() {
    const REQUESTS: usize = 200;
    let broker = start();
    let mut conn = Conn::connect(broker.addr());
    let versions = conn.api_versions(1);
    let api_versions_max = versions.range(API_VERSIONS).unwrap().max_version;
    let metadata_range = versions.range(METADATA).expect("Metadata advertised");
    let newest_metadata = metadata_version(&versions);

    let mut kinds = vec![
        Kind::ApiVersionsV0,
        Kind::Metadata(newest_metadata),
        Kind::Metadata(metadata_range.min_version),
        Kind::ApiVersionsUnsupported,
    ];
    if api_versions_max >= 3 {
        kinds.push(Kind::ApiVersionsV3);
    }

    // Correlation ids in no particular order, some negative.
    let plan: Vec<(i32, Kind)> = (0..REQUESTS)
        .map(|i| {
            let id = ((i as i64 * 7919 + 13) % 100_003 - 50_000) as i32;
            (id, kinds[i % kinds.len()])
        })
        .collect();
    let mut bytes = Vec::new();
    for &(id, kind) in &plan {
        bytes.extend(match kind {
            Kind::ApiVersionsV0 => api_versions_request(0, id),
            Kind::ApiVersionsV3 => api_versions_request(3, id),
            Kind::ApiVersionsUnsupported => api_versions_request(api_versions_max + 1, id),
            Kind::Metadata(v) => metadata_request(v, id),
        });
    }
    // All at once, without waiting for any response.
    conn.send(&bytes).expect("send the pipelined requests");

    for (i, &(id, kind)) in plan.iter().enumerate() {
        let payload = conn.read_response(id, &format!("response {i} of {REQUESTS} ({kind:?})"));
        match kind {
            Kind::ApiVersionsV0 | Kind::ApiVersionsV3 => {
                let version = if matches!(kind, Kind::ApiVersionsV3) {
                    3
                } else {
                    0
                };
                let response = parse_api_versions(&payload, version);
                assert_eq!(response.error_code, 0, "response {i} ({kind:?})");
                assert_eq!(response.apis, versions.apis, "response {i} ({kind:?})");
            }
            Kind::ApiVersionsUnsupported => {
                let response = parse_api_versions(&payload, 0);
                assert_eq!(response.error_code, UNSUPPORTED_VERSION, "response {i}");
            }
            Kind::Metadata(_) => assert!(payload.len() > 4, "response {i}: empty Metadata"),
        }
    }

    // Nothing more was sent than asked for, and the connection still works.
    conn.api_versions(2);
}
