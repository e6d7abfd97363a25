//! Admission under hostile clients, over real TCP:
//! - `queued.max.request.bytes`: connections sending frames near
//!   `socket.request.max.bytes`, and connections holding such frames one
//!   byte short of complete, neither lock out a fresh client nor take the
//!   broker's memory past the budget plus a fixed overhead (peak RSS,
//!   VmHWM, from /proc).
//! - `max.connections.per.ip` (and its overrides): the connection over the
//!   limit is closed at once.
//! - `max.connections` and `listener.name.<l>.max.connections`: the
//!   connection over the limit waits, and is served once a slot frees.
//! - A client that disconnects during a long-poll Fetch is noticed at once,
//!   and a pipelined request behind a long poll is still answered in order.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use gregor_tests::kafka::{self, Isolation};
use gregor_tests::wire::{
    self, fetch_request, is_closed_error, metadata_request, parse_api_versions, put_i16, put_i32,
    request_frame, Conn,
};
use gregor_tests::{free_port, wait_for, Broker};

const MIB: usize = 1 << 20;
/// `socket.request.max.bytes` of the memory test, and its frames' size.
const FRAME: usize = 48 * MIB;
/// `queued.max.request.bytes` of the memory test: one such frame fits,
/// two do not.
const BUDGET: usize = 64 * MIB;
/// What the broker may use beyond its own peak before the abuse and the
/// budget: the copies the handler path makes of the one frame in flight,
/// which the budget does not cover (the request in the module's linear
/// memory, its records handed back to the host; measured: about two
/// frames), and slack for allocator fragmentation and the fresh client.
const OVERHEAD: u64 = (2 * FRAME + 32 * MIB) as u64;

const PRODUCE: i16 = 0;

/// `GET /metrics` on the admin endpoint.
fn scrape(admin: SocketAddr) -> String {
    gregor_tests::scrape_metrics(&admin.to_string())
}

/// One sample by its exact name and labels, if /metrics has it.
fn try_sample(admin: SocketAddr, series: &str) -> Option<f64> {
    gregor_tests::metric_sample(&scrape(admin), series)
}

fn sample(admin: SocketAddr, series: &str) -> f64 {
    try_sample(admin, series).unwrap_or_else(|| panic!("no sample {series} in /metrics"))
}

/// Open PLAINTEXT connections (the series appears with the first one).
fn open_connections(admin: SocketAddr) -> f64 {
    try_sample(admin, "gregor_connections{listener=\"PLAINTEXT\"}").unwrap_or(0.0)
}

fn admin_settings(admin: &str) -> Vec<(&str, &str)> {
    vec![("admin.listener", admin)]
}

/// The start of a Produce v3 frame whose size prefix says `frame_len` and
/// whose one partition carries junk record bytes up to that size; returns
/// it and how many junk bytes complete the frame.
fn big_produce(topic: &str, correlation_id: i32, frame_len: usize) -> (Vec<u8>, usize) {
    let mut body = Vec::new();
    put_i16(&mut body, -1); // transactional_id
    put_i16(&mut body, 1); // acks
    put_i32(&mut body, 30_000); // timeout_ms
    put_i32(&mut body, 1);
    put_i16(&mut body, topic.len() as i16);
    body.extend_from_slice(topic.as_bytes());
    put_i32(&mut body, 1);
    put_i32(&mut body, 0); // partition
    put_i32(&mut body, 0); // records length, patched below
    let mut frame = request_frame(PRODUCE, 3, correlation_id, false, &body);
    let junk = frame_len - (frame.len() - 4);
    let end = frame.len();
    frame[end - 4..].copy_from_slice(&(junk as i32).to_be_bytes());
    frame[..4].copy_from_slice(&(frame_len as i32).to_be_bytes());
    (frame, junk)
}

fn write_junk(stream: &mut TcpStream, mut bytes: usize) -> std::io::Result<()> {
    let chunk = vec![0xa5u8; MIB];
    while bytes > 0 {
        let n = bytes.min(chunk.len());
        stream.write_all(&chunk[..n])?;
        bytes -= n;
    }
    Ok(())
}

fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_write_timeout(Some(Duration::from_secs(120)))
        .expect("write timeout");
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .expect("read timeout");
    stream
}

/// The broker still serves a new client: raw ApiVersions and Metadata,
/// then a small produce and consume with librdkafka.
async fn fresh_client_works(broker: &Broker, topic: &str, round: usize) {
    let mut conn = Conn::connect(broker.addr());
    conn.api_versions(1);
    conn.round_trip(&metadata_request(1, 2), 2);
    let values: Vec<String> = (0..3).map(|i| format!("round-{round}-{i}")).collect();
    let producer = kafka::producer(broker, &[]);
    kafka::send_values(&producer, topic, 1, &values).await;
    let read = kafka::read_values(
        broker,
        topic,
        1,
        Isolation::ReadUncommitted,
        (round + 1) * values.len(),
        Duration::from_secs(60),
    )
    .await;
    assert!(
        values.iter().all(|value| read[&0].contains(value)),
        "round {round}: read {:?}",
        read[&0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn big_and_held_frames_stay_within_the_memory_budget() {
    let admin = format!("127.0.0.1:{}", free_port());
    let frame = FRAME.to_string();
    let budget = BUDGET.to_string();
    let mut settings = admin_settings(&admin);
    settings.push(("socket.request.max.bytes", &frame));
    settings.push(("queued.max.request.bytes", &budget));
    let broker = Broker::start_with(&settings);
    let admin: SocketAddr = admin.parse().expect("admin address");
    kafka::create_topic(&broker, "fresh", 1).await;
    kafka::create_topic(&broker, "abuse", 1).await;
    fresh_client_works(&broker, "fresh", 0).await;
    assert_eq!(
        sample(admin, "gregor_memory_pool_capacity_bytes"),
        BUDGET as f64
    );
    let idle_peak = broker.status_bytes("VmHWM");

    let release = Arc::new(AtomicBool::new(false));
    let addr = broker.addr();
    // Holders send all of a frame but its last byte, and wait.
    let holders: Vec<_> = (0..3)
        .map(|i| {
            let release = Arc::clone(&release);
            thread::spawn(move || {
                let mut stream = connect(addr);
                let (head, junk) = big_produce("abuse", 100 + i, FRAME);
                let sent = stream
                    .write_all(&head)
                    .and_then(|()| write_junk(&mut stream, junk - 1));
                while !release.load(Ordering::Relaxed) {
                    thread::sleep(Duration::from_millis(50));
                }
                sent
            })
        })
        .collect();
    // Senders send whole frames and wait for the answer (or the close).
    let senders: Vec<_> = (0..3)
        .map(|i| {
            thread::spawn(move || {
                let mut stream = connect(addr);
                let (head, junk) = big_produce("abuse", 200 + i, FRAME);
                stream.write_all(&head)?;
                write_junk(&mut stream, junk)?;
                let mut answer = [0u8; 8];
                match stream.read_exact(&mut answer) {
                    Ok(()) => Ok(Some(i32::from_be_bytes([
                        answer[4], answer[5], answer[6], answer[7],
                    ]))),
                    Err(e) if is_closed_error(&e) => Ok(None),
                    Err(e) => Err(e),
                }
            })
        })
        .collect();

    // A holder ends up with the budget; every other big frame waits.
    wait_for(
        "a held frame and waiting connections",
        Duration::from_secs(60),
        || {
            let held = sample(admin, "gregor_memory_pool_used_bytes") >= FRAME as f64;
            let waiting = sample(admin, "gregor_memory_pool_waiting_connections") >= 2.0;
            (held && waiting).then_some(())
        },
    );
    fresh_client_works(&broker, "fresh", 1).await;
    let abused_peak = broker.status_bytes("VmHWM");
    let bound = idle_peak + BUDGET as u64 + OVERHEAD;
    println!(
        "idle peak {} MiB, peak under abuse {} MiB, bound {} MiB",
        idle_peak >> 20,
        abused_peak >> 20,
        bound >> 20
    );
    assert!(
        abused_peak <= bound,
        "peak RSS {abused_peak} over idle peak {idle_peak} + budget {BUDGET} + overhead {OVERHEAD}"
    );

    // Once the holders go, every waiting frame is read in its turn.
    release.store(true, Ordering::Relaxed);
    for holder in holders {
        let _ = holder.join().expect("holder thread");
    }
    for (i, sender) in senders.into_iter().enumerate() {
        match sender.join().expect("sender thread") {
            Ok(Some(correlation_id)) => assert_eq!(correlation_id, 200 + i as i32),
            Ok(None) => {}
            Err(e) => panic!("sender {i}: {e}"),
        }
    }
    wait_for("the budget to drain", Duration::from_secs(60), || {
        (sample(admin, "gregor_memory_pool_used_bytes") == 0.0
            && sample(admin, "gregor_memory_pool_waiting_connections") == 0.0)
            .then_some(())
    });
    fresh_client_works(&broker, "fresh", 2).await;
    let final_peak = broker.status_bytes("VmHWM");
    println!("peak after every frame was read {} MiB", final_peak >> 20);
    assert!(
        final_peak <= bound,
        "peak RSS {final_peak} over idle peak {idle_peak} + budget {BUDGET} + overhead {OVERHEAD}"
    );
}

/// A TCP connection to `addr` from the loopback address `from`.
fn connect_from(from: [u8; 4], addr: SocketAddr) -> Conn {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).expect("socket");
    socket
        .bind(&SocketAddr::from((from, 0)).into())
        .expect("bind a loopback address");
    socket
        .connect_timeout(&addr.into(), wire::IO_TIMEOUT)
        .expect("connect");
    let stream: TcpStream = socket.into();
    stream.set_nodelay(true).expect("nodelay");
    stream
        .set_read_timeout(Some(wire::IO_TIMEOUT))
        .expect("read timeout");
    stream
        .set_write_timeout(Some(wire::IO_TIMEOUT))
        .expect("write timeout");
    Conn { stream }
}

/// The broker closes a connection over the per-address limit without
/// reading from it: the client sees EOF or a reset, even after sending.
fn expect_refused(mut conn: Conn, what: &str) {
    let _ = conn.send(&wire::api_versions_request(0, 99));
    conn.expect_closed(what);
}

#[test]
fn max_connections_per_ip_and_overrides() {
    let (broker, admin) = gregor_tests::start_with_admin(&[
        ("max.connections.per.ip", "2"),
        (
            "max.connections.per.ip.overrides",
            "127.0.0.2:3,127.0.0.3:0",
        ),
    ]);
    let admin: SocketAddr = admin.parse().expect("admin address");
    // The harness's readiness probe may still be counted: wait for it to go.
    wait_for("no open connection", Duration::from_secs(10), || {
        (open_connections(admin) == 0.0).then_some(())
    });

    let mut local: Vec<Conn> = (0..2)
        .map(|_| connect_from([127, 0, 0, 1], broker.addr()))
        .collect();
    for (i, conn) in local.iter_mut().enumerate() {
        conn.api_versions(i as i32);
    }
    expect_refused(
        connect_from([127, 0, 0, 1], broker.addr()),
        "a third connection from 127.0.0.1 (max.connections.per.ip=2)",
    );
    let mut overridden: Vec<Conn> = (0..3)
        .map(|_| connect_from([127, 0, 0, 2], broker.addr()))
        .collect();
    for (i, conn) in overridden.iter_mut().enumerate() {
        conn.api_versions(10 + i as i32);
    }
    expect_refused(
        connect_from([127, 0, 0, 2], broker.addr()),
        "a fourth connection from 127.0.0.2 (override 3)",
    );
    expect_refused(
        connect_from([127, 0, 0, 3], broker.addr()),
        "any connection from 127.0.0.3 (override 0)",
    );
    assert_eq!(
        sample(
            admin,
            "gregor_connections_rejected_total{reason=\"max.connections.per.ip\"}"
        ),
        3.0
    );
    assert_eq!(open_connections(admin), 5.0);

    // Closing one frees its address's slot.
    drop(local.pop());
    wait_for(
        "the closed connection to be counted out",
        Duration::from_secs(10),
        || (open_connections(admin) == 4.0).then_some(()),
    );
    let mut again = connect_from([127, 0, 0, 1], broker.addr());
    again.api_versions(20);
    for conn in local.iter_mut().chain(overridden.iter_mut()) {
        conn.api_versions(21);
    }
}

#[test]
fn max_connections_holds_new_connections_until_a_slot_frees() {
    let admin = format!("127.0.0.1:{}", free_port());
    let mut settings = admin_settings(&admin);
    settings.push(("max.connections", "3"));
    settings.push((
        "listener.security.protocol.map",
        "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
    ));
    settings.push(("listener.name.other.max.connections", "1"));
    let broker = Broker::start_with_listeners(&["OTHER"], &settings);
    let admin: SocketAddr = admin.parse().expect("admin address");
    wait_for("no open connection", Duration::from_secs(10), || {
        (open_connections(admin) == 0.0).then_some(())
    });
    let other: SocketAddr = broker.listener_bootstrap("OTHER").parse().expect("address");

    // OTHER takes one connection; a second one waits for it.
    let mut on_other = Conn::connect(other);
    on_other.api_versions(1);
    let mut waiting_other = Conn::connect(other);
    waiting_other
        .send(&wire::api_versions_request(0, 2))
        .expect("send");
    wait_for("OTHER's listener to block", Duration::from_secs(10), || {
        (sample(admin, "gregor_connections_blocked_total") >= 1.0).then_some(())
    });
    // PLAINTEXT still accepts up to the broker's three.
    let mut first = Conn::connect(broker.addr());
    first.api_versions(3);
    let mut second = Conn::connect(broker.addr());
    second.api_versions(4);
    let mut waiting = Conn::connect(broker.addr());
    waiting
        .send(&wire::api_versions_request(0, 5))
        .expect("send");
    wait_for(
        "PLAINTEXT's listener to block",
        Duration::from_secs(10),
        || (sample(admin, "gregor_connections_blocked_total") >= 2.0).then_some(()),
    );
    // Held, not refused and not answered.
    waiting
        .stream
        .set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    let mut byte = [0u8; 1];
    match waiting.stream.read(&mut byte) {
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
        other => panic!("a connection over max.connections was not held: {other:?}"),
    }
    waiting
        .stream
        .set_read_timeout(Some(wire::IO_TIMEOUT))
        .expect("timeout");

    // A PLAINTEXT close lets PLAINTEXT's waiting connection in (the
    // broker is full again, so OTHER's keeps waiting).
    drop(first);
    let payload = waiting.read_frame().expect("answer after a slot freed");
    assert_eq!(parse_api_versions(&payload, 0).correlation_id, 5);
    // Closing OTHER's connection frees both a broker and a listener slot.
    on_other.stream.shutdown(Shutdown::Both).expect("close");
    drop(on_other);
    let payload = waiting_other.read_frame().expect("answer on OTHER");
    assert_eq!(parse_api_versions(&payload, 0).correlation_id, 2);
    second.api_versions(6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_leaving_during_a_long_poll_is_noticed_at_once() {
    let admin = format!("127.0.0.1:{}", free_port());
    let broker = Broker::start_with(&admin_settings(&admin));
    let admin: SocketAddr = admin.parse().expect("admin address");
    kafka::create_topic(&broker, "empty", 1).await;
    wait_for("no open connection", Duration::from_secs(10), || {
        (open_connections(admin) == 0.0).then_some(())
    });

    // A pipelined request behind a short long poll is answered after it,
    // in order.
    let mut conn = Conn::connect(broker.addr());
    let mut pipelined = fetch_request("empty", 0, 500, 1);
    pipelined.extend(wire::api_versions_request(0, 2));
    conn.send(&pipelined).expect("send");
    assert_eq!(
        wire::correlation_id_of(&conn.read_frame().expect("fetch")),
        1
    );
    let payload = conn.read_frame().expect("pipelined ApiVersions");
    assert_eq!(parse_api_versions(&payload, 0).correlation_id, 2);

    // A client that leaves during a 30 s long poll is gone at once.
    conn.send(&fetch_request("empty", 0, 30_000, 3))
        .expect("send");
    wait_for("the fetch to be in flight", Duration::from_secs(10), || {
        (open_connections(admin) == 1.0).then_some(())
    });
    drop(conn);
    wait_for(
        "the connection to close before the long poll ends",
        Duration::from_secs(10),
        || (open_connections(admin) == 0.0).then_some(()),
    );
    let mut fresh = Conn::connect(broker.addr());
    fresh.api_versions(4);
}
