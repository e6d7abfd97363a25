//! Chaos (ApiKey 1099): a module that misbehaves on request, so the tests
//! can prove the sandbox contains it. Never load it into a real broker.
//!
//! The first body byte picks the behaviour: 1 traps (a panic), 2 loops
//! forever, 3 allocates without bound, 4 writes a thousand log lines,
//! 5 long-polls partition 0 of the topic named by the rest of the body
//! (from the third byte) with `log.fetch-or-park` straight from a raw
//! handler and answers the bytes it read as a big-endian u32 (the host
//! parks the request and calls `handle` again once a record arrives),
//! 6 takes all the memory it may have, in MiB blocks, and spins holding
//! it until its deadline (so concurrent calls hold memory at once);
//! anything else echoes the body back. When the second byte is 1, the
//! module offers an error response for a failed call (the error code, as
//! two bytes); otherwise it has none and the host closes the connection.

use gregor_sdk::wire::custom_api_info;
use gregor_sdk::{log, logging, ApiInfo, Outcome, RawHandler, RequestContext};

pub const API_KEY: i16 = 1099;

struct Chaos;

impl RawHandler for Chaos {
    fn describe() -> ApiInfo {
        custom_api_info(API_KEY, "Chaos", 0, 0)
    }

    fn handle(_ctx: RequestContext, body: Vec<u8>) -> Outcome {
        match body.first() {
            Some(1) => panic!("chaos: asked to trap"),
            Some(2) => {
                let mut spins: u64 = 0;
                loop {
                    spins = std::hint::black_box(spins.wrapping_add(1));
                }
            }
            Some(3) => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(std::hint::black_box(vec![7u8; 1 << 20]));
                }
            }
            Some(6) => {
                let mut hoard: Vec<Vec<u8>> = Vec::with_capacity(1 << 16);
                while hoard.len() < hoard.capacity() {
                    let mut block = Vec::new();
                    if block.try_reserve_exact(1 << 20).is_err() {
                        break;
                    }
                    block.resize(1 << 20, 7u8);
                    hoard.push(block);
                }
                loop {
                    std::hint::black_box(&hoard);
                }
            }
            Some(4) => {
                for line in 0..1000 {
                    logging::log(logging::Level::Info, &format!("chaos log line {line}"));
                }
                Outcome::Respond(body)
            }
            Some(5) => {
                let topic = String::from_utf8_lossy(body.get(2..).unwrap_or_default());
                let wanted = [log::FetchPartition {
                    topic: topic.into_owned(),
                    partition: 0,
                    fetch_offset: 0,
                    partition_max_bytes: 1 << 20,
                }];
                let options = log::FetchOptions {
                    max_wait_ms: 60_000,
                    min_bytes: 1,
                    max_bytes: 1 << 20,
                    isolation_level: 0,
                };
                let Some(fetched) = log::fetch_or_park(&wanted, options) else {
                    // Parked: the host discards this and calls again.
                    return Outcome::NoResponse;
                };
                let fetched = fetched
                    .iter()
                    .map(|partition| partition.records.size())
                    .fold(0u32, u32::saturating_add);
                Outcome::Respond(fetched.to_be_bytes().to_vec())
            }
            _ => Outcome::Respond(body),
        }
    }

    fn error_response(_ctx: RequestContext, body: Vec<u8>, error_code: i16) -> Option<Vec<u8>> {
        (body.get(1) == Some(&1)).then(|| error_code.to_be_bytes().to_vec())
    }
}

gregor_sdk::export_raw_handler!(Chaos);
