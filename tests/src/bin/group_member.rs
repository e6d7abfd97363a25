//! `group_member BOOTSTRAP GROUP TOPIC SESSION_TIMEOUT_MS`: a librdkafka
//! consumer in a group, run as a child process so that a test can SIGKILL
//! it (a member that vanishes without LeaveGroup). It prints
//! `ASSIGNED p,p,...` whenever its assignment changes and exits on its own
//! after two minutes, so a failed test never leaves it behind for long.

use std::io::Write;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [bootstrap, group, topic, session] = args.as_slice() else {
        eprintln!("usage: group_member BOOTSTRAP GROUP TOPIC SESSION_TIMEOUT_MS");
        std::process::exit(2);
    };
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("broker.address.family", "v4")
        .set("group.id", group)
        .set("client.id", "group-member-child")
        .set("session.timeout.ms", session)
        .set("heartbeat.interval.ms", "500")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .expect("create the consumer");
    consumer.subscribe(&[topic]).expect("subscribe");
    let mut last: Option<Vec<i32>> = None;
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(120) {
        let _ = consumer.poll(Duration::from_millis(50));
        let mut partitions: Vec<i32> = consumer
            .assignment()
            .map(|list| list.elements().iter().map(|e| e.partition()).collect())
            .unwrap_or_default();
        partitions.sort_unstable();
        if last.as_ref() != Some(&partitions) {
            let text: Vec<String> = partitions.iter().map(i32::to_string).collect();
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "ASSIGNED {}", text.join(","));
            let _ = out.flush();
            last = Some(partitions);
        }
    }
}
