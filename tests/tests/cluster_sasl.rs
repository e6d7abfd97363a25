//! Replication and transaction markers over a SASL_PLAINTEXT inter-broker
//! listener (issues 14 and 15): three combined-mode nodes whose
//! `inter.broker.listener.name` is INTERNAL, a SASL_PLAINTEXT listener,
//! with `authorizer_acl`. Each broker logs in there with
//! `sasl.mechanism.inter.broker.protocol` and the listener's JAAS login
//! on every connection its replica fetchers and its transaction
//! coordinator open; clients use the PLAINTEXT listener (ANONYMOUS).
//!
//! - As the `broker` super user (SCRAM-SHA-256): an idempotent acks=all
//!   producer writes to an RF 3 topic with `min.insync.replicas=2`, the
//!   ISR keeps its three members, the leader is SIGKILLed and every
//!   record is read back from the new leader; a transaction over three
//!   partitions led by three brokers commits (its coordinator sends the
//!   markers of the others' partitions as WriteTxnMarkers) and a
//!   read_committed consumer sees all of it.
//! - With PLAIN: a follower with a wrong password is refused at login
//!   (logged) and stays out of the ISR; one that logs in as a user
//!   without CLUSTER_ACTION on the cluster is refused its fetches and
//!   stays out too, until an ACL grants it CLUSTER_ACTION.

use std::time::{Duration, Instant};

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_topics_request::{CreatableReplicaAssignment, CreatableTopic};
use kafka_protocol::messages::{BrokerId, CreateAclsRequest, CreateTopicsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{
    BaseRecord, DefaultProducerContext, FutureRecord, Producer, ThreadedProducer,
};

use gregor_tests::cluster::{self, call, metadata, Cluster, ClusterBuilder};
use gregor_tests::replicated::{
    await_view, consume, create_on, durable_producer, leader_where, read_committed, values,
    CONVERGE,
};
use gregor_tests::wait_for;

const RECORDS: usize = 300;
const TXN_PARTITIONS: i32 = 3;
const CALL: Duration = Duration::from_secs(30);

/// The JAAS login `user`/`password` (Gregor reads only those two).
fn jaas(user: &str, password: &str) -> String {
    format!("org.apache.kafka.common.security.plain.PlainLoginModule required username=\"{user}\" password=\"{password}\";")
}

/// Three nodes replicating over INTERNAL (SASL_PLAINTEXT) with
/// `mechanism`, every one logging in as `broker` unless a test overrides
/// a node's login.
fn sasl_cluster(mechanism: &str) -> ClusterBuilder {
    cluster::cluster(3)
        .listener("INTERNAL", "SASL_PLAINTEXT")
        .set("inter.broker.listener.name", "INTERNAL")
        .set("sasl.mechanism.inter.broker.protocol", mechanism)
        .set(&login_key(mechanism), &jaas("broker", "broker-secret"))
        .set(
            "sasl.bootstrap.users",
            "broker:broker-secret,mallory:mallory-secret",
        )
        .set("authorizer", "authorizer_acl")
        .set("super.users", "User:broker;User:ANONYMOUS")
        .set("replica.fetch.backoff.ms", "200")
        .set("replica.fetch.wait.max.ms", "200")
}

fn login_key(mechanism: &str) -> String {
    format!(
        "listener.name.internal.{}.sasl.jaas.config",
        mechanism.to_ascii_lowercase()
    )
}

/// Creates `topic` with partition `p` on replicas `p+1, p+2, p+3` (mod
/// 3), so broker `p+1` leads it, and waits until node 1 shows those
/// leaders.
fn create_spread(cluster: &Cluster, topic: &str) {
    let assignments = (0..TXN_PARTITIONS)
        .map(|p| {
            CreatableReplicaAssignment::default()
                .with_partition_index(p)
                .with_broker_ids((0..3).map(|i| BrokerId((p + i) % 3 + 1)).collect())
        })
        .collect();
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_num_partitions(-1)
            .with_replication_factor(-1)
            .with_assignments(assignments)]);
    let response = call(cluster.node(1).addr(), &request, 5).expect("a CreateTopics answer");
    assert_eq!(response.topics[0].error_code, 0, "{response:?}");
    wait_for("each partition led by its first replica", CONVERGE, || {
        let md = metadata(cluster.node(1).addr())?;
        let t = md
            .topics
            .iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.as_str() == topic))?;
        let mut leaders: Vec<(i32, i32)> = t
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.leader_id.0))
            .collect();
        leaders.sort_unstable();
        (leaders == [(0, 1), (1, 2), (2, 3)]).then_some(())
    });
}

/// One transaction of `values` over every partition of `topic`, committed.
fn commit_transaction(bootstrap: &str, topic: &str, values: &[String]) {
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("broker.address.family", "v4")
        .set("transactional.id", "sasl-markers")
        .set("linger.ms", "5")
        .create()
        .expect("create a transactional producer");
    // The first FindCoordinator creates __transaction_state: retried
    // until its partition has a leader.
    let deadline = Instant::now() + CONVERGE;
    while let Err(error) = producer.init_transactions(CALL) {
        assert!(Instant::now() < deadline, "init_transactions: {error}");
        std::thread::sleep(Duration::from_millis(500));
    }
    producer.begin_transaction().expect("begin_transaction");
    for (i, value) in values.iter().enumerate() {
        let partition = i32::try_from(i).unwrap_or_default() % TXN_PARTITIONS;
        producer
            .send(
                BaseRecord::<str, str>::to(topic)
                    .payload(value)
                    .partition(partition),
            )
            .map_err(|(e, _)| e)
            .expect("queue a record");
    }
    producer
        .commit_transaction(CALL)
        .expect("commit_transaction");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_and_markers_run_over_a_sasl_inter_broker_listener() {
    let mut cluster = sasl_cluster("SCRAM-SHA-256")
        .set("offsets.topic.num.partitions", "1")
        .set("transaction.state.log.num.partitions", "1")
        .start();
    cluster.await_formed(&[1, 2, 3]);

    // A transaction over partitions led by the three brokers: whichever
    // leads its coordinator, two markers go to other brokers over INTERNAL.
    let bootstrap = cluster.bootstrap();
    create_spread(&cluster, "txn");
    let committed = values("txn", 30);
    let (txn_bootstrap, txn_topic, txn_values) =
        (bootstrap.clone(), "txn".to_string(), committed.clone());
    tokio::task::spawn_blocking(move || {
        commit_transaction(&txn_bootstrap, &txn_topic, &txn_values)
    })
    .await
    .expect("the transaction");
    let (read_bootstrap, expected) = (bootstrap.clone(), committed.len());
    let mut read = tokio::task::spawn_blocking(move || {
        read_committed(&read_bootstrap, "txn", TXN_PARTITIONS, expected)
    })
    .await
    .expect("the read_committed reader");
    read.sort();
    assert_eq!(read, committed, "read_committed after the commit");

    // acks=all with min.insync.replicas=2: every follower fetches over
    // INTERNAL, so the ISR keeps its three members.
    let topic = "durable";
    create_on(&cluster, topic, &[1, 2, 3], &[("min.insync.replicas", "2")]);
    assert_eq!(leader_where(&cluster, 1, topic, |_, _| true), (1, 0));
    let producer = durable_producer(&bootstrap);
    let sent = values("durable", RECORDS);
    let started = Instant::now();
    let pending: Vec<_> = sent
        .iter()
        .map(|value| {
            producer.send(
                FutureRecord::<str, str>::to(topic)
                    .payload(value)
                    .partition(0),
                Duration::from_secs(60),
            )
        })
        .collect();
    for (value, delivery) in sent.iter().zip(pending) {
        if let Err((error, _)) = delivery.await {
            panic!("delivering {value}: {error}");
        }
    }
    eprintln!(
        "{RECORDS} acks=all records over a SASL inter-broker listener in {:?}",
        started.elapsed()
    );
    for via in [1, 2, 3] {
        await_view(&cluster, via, topic, "has the ISR [1, 2, 3]", |v| {
            v.leader == 1 && v.isr == [1, 2, 3]
        });
    }

    // The leader dies: a follower takes over with every record.
    cluster.node_mut(1).kill();
    let (new_leader, _) = leader_where(&cluster, 2, topic, |leader, _| leader != 1);
    let survivors = format!(
        "{},{}",
        cluster.node(2).bootstrap(),
        cluster.node(3).bootstrap()
    );
    assert_eq!(
        consume(&survivors, topic, RECORDS),
        sent,
        "read from {new_leader}"
    );
    for node in [2, 3] {
        let log = cluster.node(node).log_text();
        assert!(
            !log.contains("refused the broker's SASL login"),
            "node {node} was refused a login"
        );
    }
}

/// CreateAcls through node 1: `User:mallory` may CLUSTER_ACTION on the
/// cluster.
fn grant_cluster_action(cluster: &Cluster) {
    let creation = AclCreation::default()
        .with_resource_type(4)
        .with_resource_name(StrBytes::from_static_str("kafka-cluster"))
        .with_resource_pattern_type(3)
        .with_principal(StrBytes::from_static_str("User:mallory"))
        .with_host(StrBytes::from_static_str("*"))
        .with_operation(9)
        .with_permission_type(3);
    let request = CreateAclsRequest::default().with_creations(vec![creation]);
    let response = call(cluster.node(1).addr(), &request, 3).expect("a CreateAcls answer");
    assert_eq!(response.results[0].error_code, 0, "{response:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_without_a_valid_login_or_cluster_action_stays_out_of_the_isr() {
    let key = login_key("PLAIN");
    let cluster = sasl_cluster("PLAIN")
        .set("replica.lag.time.max.ms", "2000")
        .set_on(2, &key, &jaas("broker", "wrong-secret"))
        .set_on(3, &key, &jaas("mallory", "mallory-secret"))
        .start();
    cluster.await_formed(&[1, 2, 3]);
    let topic = "guarded";
    create_on(&cluster, topic, &[1, 2, 3], &[]);
    assert_eq!(leader_where(&cluster, 1, topic, |_, _| true), (1, 0));
    let producer = ClientConfig::new()
        .set("bootstrap.servers", cluster.node(1).bootstrap())
        .set("broker.address.family", "v4")
        .set("acks", "1")
        .create::<rdkafka::producer::FutureProducer>()
        .expect("create a producer");
    for value in values("guarded", 20) {
        let record = FutureRecord::<str, str>::to(topic)
            .payload(&value)
            .partition(0);
        if let Err((error, _)) = producer.send(record, CALL).await {
            panic!("delivering {value}: {error}");
        }
    }

    // Node 2 cannot log in, node 3 logs in but may not fetch as a replica:
    // the leader shrinks both out of the ISR.
    await_view(&cluster, 1, topic, "has the ISR [1]", |v| v.isr == [1]);
    wait_for(
        "node 2 to log the refused login",
        Duration::from_secs(10),
        || {
            cluster
                .node(2)
                .log_text()
                .contains("broker 1 refused the broker's SASL login as broker")
                .then_some(())
        },
    );

    wait_for(
        "node 3 to log the refused fetch",
        Duration::from_secs(10),
        || {
            cluster
                .node(3)
                .log_text()
                .contains("the inter-broker user needs CLUSTER_ACTION")
                .then_some(())
        },
    );

    // CLUSTER_ACTION for mallory: node 3's fetches pass and it catches up;
    // node 2 stays out.
    grant_cluster_action(&cluster);
    let view = await_view(&cluster, 1, topic, "has the ISR [1, 3]", |v| {
        v.isr == [1, 3]
    });
    assert_eq!(view.leader, 1);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let view = await_view(&cluster, 1, topic, "still has the ISR [1, 3]", |_| true);
    assert_eq!(view.isr, [1, 3], "node 2 joined without a valid login");
}

/// A SASL inter-broker listener without a mechanism, or without a login
/// for it: refused at start with a message naming the setting, before
/// the node listens (Kafka refuses such a config too).
#[test]
fn a_sasl_inter_broker_listener_without_a_login_is_refused_at_start() {
    let no_mechanism = cluster::cluster(1)
        .listener("INTERNAL", "SASL_PLAINTEXT")
        .set("inter.broker.listener.name", "INTERNAL");
    let no_login = no_mechanism
        .clone()
        .set("sasl.mechanism.inter.broker.protocol", "SCRAM-SHA-512");
    for (builder, named) in [
        (no_mechanism, "sasl.mechanism.inter.broker.protocol"),
        (
            no_login,
            "listener.name.internal.scram-sha-512.sasl.jaas.config",
        ),
    ] {
        let dir = tempfile::tempdir().expect("a directory");
        let mut node = builder.node(dir.path(), 1, &builder.free_voters());
        let status = node
            .exit_within(Duration::from_secs(20))
            .expect("the node exits at start");
        assert!(!status.success());
        let log = node.log_text();
        assert!(log.contains(named), "{log}");
        assert!(log.contains("inter-broker listener INTERNAL"), "{log}");
    }
}
