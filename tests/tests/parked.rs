//! Waiting requests hold no Wasm instance (Kafka's purgatory): more
//! long-poll fetches than the instance pool has room for (512) wait at
//! once, while new clients are served as usual, and every one of them is
//! answered with the record that ends its wait. A waiting request whose
//! client goes away is dropped at once.

use std::time::Duration;

use gregor_tests::wire::{correlation_id_of, fetch_request, request_frame, Conn};
use gregor_tests::{
    kafka, plugin_dir_with_examples, scrape_metrics, start_with_admin, wait_for, Broker,
};
use rdkafka::producer::{FutureProducer, FutureRecord};

/// More than the broker's 512 component instances.
const WAITING: usize = 600;

/// The tests of this file hold over a thousand sockets at once: raise the
/// soft open-file limit to the hard one, as the broker does for itself.
fn raise_fd_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a struct we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// A broker with its admin endpoint, for `/metrics`.
fn start(settings: &[(&str, &str)]) -> (Broker, String) {
    raise_fd_limit();
    start_with_admin(settings)
}

fn parked(admin: &str) -> usize {
    scrape_metrics(admin)
        .lines()
        .find_map(|line| line.strip_prefix("gregor_parked_requests "))
        .and_then(|value| value.trim().parse().ok())
        .expect("gregor_parked_requests in /metrics")
}

fn traps(admin: &str) -> f64 {
    scrape_metrics(admin)
        .lines()
        .filter(|line| line.starts_with("gregor_plugin_traps_total{"))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Produces the record `wake-up` to `topic`, which the parked calls wait for.
async fn wake_up(producer: &FutureProducer, topic: &str) {
    producer
        .send(
            FutureRecord::<str, str>::to(topic).payload("wake-up"),
            kafka::CALL_TIMEOUT,
        )
        .await
        .expect("produce the record the parked calls wait for");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_waiting_fetches_than_instances_leave_the_broker_serving() {
    let (broker, admin) = start(&[]);
    kafka::create_topic(&broker, "quiet", 1).await;
    kafka::create_topic(&broker, "busy", 1).await;

    let mut waiting: Vec<Conn> = (0..WAITING)
        .map(|i| {
            let mut conn = Conn::connect(broker.addr());
            conn.send(&fetch_request("quiet", 0, 120_000, i as i32))
                .expect("send a long-poll fetch");
            conn
        })
        .collect();
    let count = wait_for("every fetch parked", Duration::from_secs(60), || {
        let count = parked(&admin);
        (count >= WAITING).then_some(count)
    });
    assert_eq!(count, WAITING);

    // A new client produces and consumes while they all wait.
    let producer = kafka::producer(&broker, &[]);
    for i in 0..20 {
        producer
            .send(
                FutureRecord::<str, str>::to("busy").payload(&format!("busy-{i}")),
                kafka::CALL_TIMEOUT,
            )
            .await
            .expect("produce while fetches wait");
    }
    let read = kafka::consume_all(&broker, "busy", 1, 20, Duration::from_secs(60)).await;
    assert_eq!(read.get(&0).map(Vec::len), Some(20));

    // One record ends every wait: each connection gets its own answer,
    // carrying the record.
    wake_up(&producer, "quiet").await;
    for (i, conn) in waiting.iter_mut().enumerate() {
        let payload = conn.read_frame().expect("the parked fetch is answered");
        assert_eq!(correlation_id_of(&payload), i as i32);
        assert!(
            payload.windows(b"wake-up".len()).any(|w| w == b"wake-up"),
            "fetch {i} answered without the record"
        );
    }
    wait_for("no fetch parked", Duration::from_secs(30), || {
        (parked(&admin) == 0).then_some(())
    });
    assert_eq!(traps(&admin), 0.0, "no handler trapped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_fetch_answers_empty_when_its_wait_is_over() {
    let (broker, admin) = start(&[]);
    kafka::create_topic(&broker, "empty", 1).await;
    let mut conn = Conn::connect(broker.addr());
    conn.send(&fetch_request("empty", 0, 1_500, 7))
        .expect("send a fetch");
    let payload = conn.read_frame().expect("answered after max_wait_ms");
    assert_eq!(correlation_id_of(&payload), 7);
    assert_eq!(parked(&admin), 0);

    // A client that goes away while its fetch waits frees it at once, not
    // when its max_wait_ms runs out.
    let gone: Vec<Conn> = (0..50)
        .map(|i| {
            let mut conn = Conn::connect(broker.addr());
            conn.send(&fetch_request("empty", 0, 600_000, 100 + i))
                .expect("send a fetch");
            conn
        })
        .collect();
    wait_for("the fetches parked", Duration::from_secs(30), || {
        (parked(&admin) == 50).then_some(())
    });
    drop(gone);
    wait_for(
        "the fetches of closed connections dropped",
        Duration::from_secs(10),
        || (parked(&admin) == 0).then_some(()),
    );
    conn.api_versions(9);
    // The connection stays usable.
    conn.api_versions(8);
}

/// The chaos example (ApiKey 1099), a raw handler, long-polls with
/// `log.fetch-or-park` itself: the host parks it, which is not a trap,
/// and answers once a record arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raw_handler_long_poll_is_parked_too() {
    let plugins = plugin_dir_with_examples(&["chaos"]);
    let plugin_path = plugins.path().display().to_string();
    let (broker, admin) = start(&[("plugin.dir", plugin_path.as_str())]);
    kafka::create_topic(&broker, "legacy", 1).await;

    let mut body = vec![5, 0];
    body.extend_from_slice(b"legacy");
    let mut waiting: Vec<Conn> = (0..WAITING)
        .map(|i| {
            let mut conn = Conn::connect(broker.addr());
            conn.send(&request_frame(1099, 0, i as i32, false, &body))
                .expect("send a waiting chaos request");
            conn
        })
        .collect();
    wait_for("every call parked", Duration::from_secs(60), || {
        (parked(&admin) >= WAITING).then_some(())
    });
    let producer = kafka::producer(&broker, &[]);
    wake_up(&producer, "legacy").await;
    for (i, conn) in waiting.iter_mut().enumerate() {
        let payload = conn.read_frame().expect("the parked call is answered");
        assert_eq!(correlation_id_of(&payload), i as i32);
        let read = payload
            .get(4..8)
            .and_then(|raw| raw.try_into().ok())
            .map(u32::from_be_bytes)
            .expect("a u32 answer");
        assert!(read > 0, "call {i} answered without the record");
    }
    assert_eq!(traps(&admin), 0.0, "parking is not a trap");
}
