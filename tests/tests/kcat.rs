//! The `kcat` command-line client (Debian package `kcat`) against the
//! broker: metadata listing, a produce/consume round trip, and SCRAM
//! logins with Debian's build (librdkafka 2.0.2, whose SCRAM nonce Kafka
//! accepts).
//!
//! kcat must be installed (`.ci/deps.sh` installs it); a missing kcat is a
//! failure, never a silent skip. `KCAT` may name another binary. kcat runs
//! without the `LD_LIBRARY_PATH` cargo sets for tests, which would make it
//! load the newer librdkafka that the rdkafka crate builds instead of its
//! own.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use gregor_tests::{kafka, Broker};

const KCAT_TIMEOUT: Duration = Duration::from_secs(60);

fn kcat_bin() -> String {
    std::env::var("KCAT").unwrap_or_else(|_| "kcat".to_string())
}

struct Output {
    stdout: String,
    stderr: String,
}

/// Runs kcat with `args`, feeding it `stdin`; panics if it cannot be
/// started, runs longer than [`KCAT_TIMEOUT`] or exits with an error.
fn kcat(broker: &Broker, args: &[&str], stdin: &[u8]) -> Output {
    kcat_at(&broker.bootstrap(), args, stdin)
}

/// [`kcat`] against the listener at `bootstrap`.
fn kcat_at(bootstrap: &str, args: &[&str], stdin: &[u8]) -> Output {
    let bin = kcat_bin();
    let mut child = Command::new(&bin)
        .env_remove("LD_LIBRARY_PATH")
        .arg("-b")
        .arg(bootstrap)
        .args(["-X", "broker.address.family=v4"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run `{bin}`: {e}. kcat is required for these tests: \
                 install the Debian package `kcat` (see .ci/deps.sh) or set KCAT"
            )
        });

    let mut input = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    let writer = thread::spawn(move || {
        let _ = input.write_all(&data);
        // Dropping `input` closes kcat's stdin: end of input for -P.
    });
    let mut out = child.stdout.take().unwrap();
    let reader = thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = out.read_to_end(&mut buf);
        buf
    });
    let mut err = child.stderr.take().unwrap();
    let err_reader = thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = err.read_to_end(&mut buf);
        buf
    });

    let deadline = Instant::now() + KCAT_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for kcat") {
            break Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        thread::sleep(Duration::from_millis(50));
    };
    writer.join().unwrap();
    let stdout = String::from_utf8_lossy(&reader.join().unwrap()).into_owned();
    let stderr = String::from_utf8_lossy(&err_reader.join().unwrap()).into_owned();
    match status {
        None => panic!(
            "kcat {args:?} did not finish within {KCAT_TIMEOUT:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
        ),
        Some(status) if !status.success() => {
            panic!("kcat {args:?} failed: {status}\nstdout:\n{stdout}\nstderr:\n{stderr}")
        }
        Some(_) => Output { stdout, stderr },
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_lists_the_broker_and_a_topic() {
    let broker = Broker::start();
    kafka::create_topic(&broker, "listed", 2).await;

    let out = kcat(&broker, &["-L"], b"");
    let text = &out.stdout;
    assert!(
        text.contains(" 1 brokers:"),
        "kcat -L should list exactly one broker:\n{text}\n{}",
        out.stderr
    );
    assert!(
        text.contains(&format!(" at 127.0.0.1:{}", broker.port())),
        "kcat -L should list this broker's address:\n{text}"
    );
    assert!(
        text.contains("topic \"listed\" with 2 partitions:"),
        "kcat -L should list the topic:\n{text}"
    );
    for partition in 0..2 {
        assert!(
            text.contains(&format!("partition {partition}, leader ")),
            "kcat -L should list partition {partition} with a leader:\n{text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_produce_then_consume_round_trip() {
    let broker = Broker::start();
    let topic = "lines";
    kafka::create_topic(&broker, topic, 1).await;

    let mut lines: Vec<String> = vec![
        "hello".into(),
        "a line with spaces".into(),
        "tab\tseparated".into(),
        "ünïcödé ✓".into(),
        "x".repeat(5_000),
    ];
    lines.extend((0..200).map(|i| format!("line {i}")));
    let input = lines.iter().map(|l| format!("{l}\n")).collect::<String>();

    kcat(&broker, &["-P", "-t", topic], input.as_bytes());
    let out = kcat(
        &broker,
        &["-C", "-t", topic, "-o", "beginning", "-e", "-q"],
        b"",
    );
    let got: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(got.len(), lines.len(), "number of lines read back");
    for (i, (got, sent)) in got.iter().zip(&lines).enumerate() {
        assert_eq!(got, sent, "line {i}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_keyed_messages_round_trip_with_offsets() {
    let broker = Broker::start();
    let topic = "keyed";
    kafka::create_topic(&broker, topic, 1).await;

    let input: String = (0..100).map(|i| format!("key{i}:value {i}\n")).collect();
    kcat(&broker, &["-P", "-t", topic, "-K:"], input.as_bytes());
    let out = kcat(
        &broker,
        &[
            "-C",
            "-t",
            topic,
            "-o",
            "beginning",
            "-e",
            "-q",
            "-f",
            "%p/%o %k=%s\n",
        ],
        b"",
    );
    let expected: Vec<String> = (0..100)
        .map(|i| format!("0/{i} key{i}=value {i}"))
        .collect();
    let got: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(got, expected);
}

/// librdkafka before 2.6.1 (Debian's kcat 1.7.1 is built on 2.0.2) sends
/// its client nonce followed by the whole server nonce in SCRAM's
/// client-final message; Kafka accepts any nonce ending with the server's,
/// and so must Gregor, or Debian's kcat cannot log in with SCRAM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_logs_in_with_scram_sha256_and_sha512() {
    let broker = Broker::start_with_listeners(
        &["SASL_PLAINTEXT"],
        &[("sasl.bootstrap.users", "alice:alice-secret")],
    );
    let bootstrap = broker.listener_bootstrap("SASL_PLAINTEXT");
    for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-512"] {
        let topic = format!("scram-{}", &mechanism[12..]);
        kafka::create_topic(&broker, &topic, 1).await;
        let mechanism = format!("sasl.mechanism={mechanism}");
        let login = |args: &[&str]| -> Vec<String> {
            let mut all: Vec<String> = [
                "-X",
                "security.protocol=SASL_PLAINTEXT",
                "-X",
                &mechanism,
                "-X",
                "sasl.username=alice",
                "-X",
                "sasl.password=alice-secret",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            all.extend(args.iter().map(|s| s.to_string()));
            all
        };
        let run = |args: &[&str], stdin: &[u8]| {
            let args = login(args);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            kcat_at(&bootstrap, &args, stdin)
        };
        // -L fails fast (within its metadata timeout) when the login fails.
        let listed = run(&["-L", "-t", &topic], b"");
        assert!(
            listed
                .stdout
                .contains(&format!("topic \"{topic}\" with 1 partitions")),
            "{mechanism}: kcat -L over SASL:\n{}\n{}",
            listed.stdout,
            listed.stderr
        );
        run(&["-P", "-t", &topic], b"one\ntwo\n");
        let out = run(&["-C", "-t", &topic, "-o", "beginning", "-e", "-q"], b"");
        assert_eq!(
            out.stdout.lines().collect::<Vec<_>>(),
            ["one", "two"],
            "{mechanism}"
        );
    }
}
