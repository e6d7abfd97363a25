//! Transactions (issue 7, part 2), as far as they are built: InitProducerId
//! with a transactional id hands out a producer id, bumps its epoch on every
//! call so older instances are fenced, answers a KIP-360 retry again,
//! refuses a stale epoch with PRODUCER_FENCED and a bad timeout with
//! INVALID_TRANSACTION_TIMEOUT, and keeps all of it across a broker crash.

use gregor_tests::wire::{self, Conn};
use gregor_tests::Broker;

const INVALID_TRANSACTION_TIMEOUT: i16 = 50;
const PRODUCER_FENCED: i16 = 90;

fn read_i64(r: &mut wire::Reader) -> i64 {
    (i64::from(r.i32()) << 32) | i64::from(r.i32() as u32)
}

/// InitProducerId v1 (classic encoding): (error, producer id, epoch).
fn init_v1(broker: &Broker, transactional_id: &str, timeout_ms: i32) -> (i16, i64, i16) {
    let mut body = Vec::new();
    wire::put_i16(&mut body, transactional_id.len() as i16);
    body.extend_from_slice(transactional_id.as_bytes());
    wire::put_i32(&mut body, timeout_ms);
    let frame = wire::request_frame(22, 1, 3, false, &body);
    let response = Conn::connect(broker.addr()).round_trip(&frame, 3);
    let mut r = wire::Reader::new(&response[4..]);
    r.i32(); // throttle
    let error = r.i16();
    let id = read_i64(&mut r);
    (error, id, r.i16())
}

/// InitProducerId v3 (flexible) naming the caller's producer id and epoch.
fn init_v3(broker: &Broker, transactional_id: &str, expected: (i64, i16)) -> (i16, i64, i16) {
    let mut body = Vec::new();
    wire::put_compact_string(&mut body, transactional_id);
    wire::put_i32(&mut body, 60_000);
    body.extend_from_slice(&expected.0.to_be_bytes());
    wire::put_i16(&mut body, expected.1);
    wire::put_uvarint(&mut body, 0); // tags
    let frame = wire::request_frame(22, 3, 4, true, &body);
    let response = Conn::connect(broker.addr()).round_trip(&frame, 4);
    let mut r = wire::Reader::new(&response[4..]);
    r.skip_tags(); // response header v1
    r.i32(); // throttle
    let error = r.i16();
    let id = read_i64(&mut r);
    (error, id, r.i16())
}

#[test]
fn init_producer_id_bumps_epochs_fences_zombies_and_survives_a_crash() {
    let mut broker = Broker::start();
    let (error, pid, epoch) = init_v1(&broker, "txn-a", 60_000);
    assert_eq!((error, epoch), (0, 0), "first InitProducerId");
    assert!(pid >= 0);
    // A second instance with the same transactional id bumps the epoch.
    assert_eq!(init_v1(&broker, "txn-a", 60_000), (0, pid, 1));
    // Another transactional id has a producer id of its own.
    let (_, other, other_epoch) = init_v1(&broker, "txn-b", 60_000);
    assert_ne!(other, pid);
    assert_eq!(other_epoch, 0);

    // KIP-360: the current epoch bumps; the previous one is a retry whose
    // answer was lost and gets the current epoch again; older is fenced.
    assert_eq!(init_v3(&broker, "txn-a", (pid, 1)), (0, pid, 2));
    assert_eq!(init_v3(&broker, "txn-a", (pid, 1)), (0, pid, 2));
    let (fenced, _, _) = init_v3(&broker, "txn-a", (pid, 0));
    assert_eq!(fenced, PRODUCER_FENCED);

    let (error, _, _) = init_v1(&broker, "txn-a", 0);
    assert_eq!(error, INVALID_TRANSACTION_TIMEOUT);
    let (error, _, _) = init_v1(&broker, "txn-a", 900_001);
    assert_eq!(error, INVALID_TRANSACTION_TIMEOUT);

    // Epochs handed out are durable: a crash never hands one out twice.
    broker.kill();
    broker.restart();
    assert_eq!(init_v1(&broker, "txn-a", 60_000), (0, pid, 3));
    assert_eq!(init_v1(&broker, "txn-b", 60_000), (0, other, 1));
}
