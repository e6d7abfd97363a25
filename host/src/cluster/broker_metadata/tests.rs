use std::sync::Arc;

use super::*;
use crate::cluster::command::Command;
use crate::cluster::memory_quorum::MemoryQuorum;
use crate::cluster::reconciler;
use crate::cluster::testing::registration;
use crate::config::BrokerConfig;
use crate::log::LogStore;
use crate::metadata::dynamic::DynamicConfigs;
use crate::metadata::store::MetadataStore;

struct Node {
    _dir: tempfile::TempDir,
    quorum: Arc<MemoryQuorum<MetadataImage>>,
    topics: Arc<TopicManager>,
    metadata: BrokerMetadata,
}

/// Broker 1 of a cluster of `brokers` registered (unfenced) brokers.
fn node(brokers: i32) -> Node {
    node_seeing(brokers, |quorum| quorum)
}

/// As [`node`], with broker 1 seeing the quorum through `view`.
fn node_seeing(
    brokers: i32,
    view: impl FnOnce(Arc<dyn Quorum<MetadataImage>>) -> Arc<dyn Quorum<MetadataImage>>,
) -> Node {
    let dir = tempfile::tempdir().unwrap();
    let mut config = BrokerConfig::default();
    config
        .set_pair(&format!("log.dirs={}", dir.path().display()))
        .unwrap();
    let logs: Arc<dyn LogStore> =
        Arc::new(crate::log::manager::LogManager::open(&dir.path().join("partitions")).unwrap());
    let meta = dir.path().join("metadata");
    let dynamic = Arc::new(DynamicConfigs::open(&meta).unwrap());
    let store = MetadataStore::open(&meta).unwrap();
    let topics = Arc::new(TopicManager::open(Arc::new(config), dynamic, logs, store).unwrap());
    let quorum = Arc::new(MemoryQuorum::<MetadataImage>::new(1));
    for id in 1..=brokers {
        let Ok(Applied::BrokerRegistered { epoch }) =
            quorum.apply(&Command::RegisterBroker(registration(id, id as u128)))
        else {
            panic!("registration refused");
        };
        quorum
            .apply(&Command::UnfenceBroker {
                broker_id: id,
                epoch,
            })
            .unwrap();
    }
    let dyn_quorum: Arc<dyn Quorum<MetadataImage>> = quorum.clone();
    let metadata = BrokerMetadata::new(
        view(dyn_quorum),
        1,
        "cluster-1".into(),
        Arc::clone(&topics),
        Handle::current(),
    );
    Node {
        _dir: dir,
        quorum,
        topics,
        metadata,
    }
}

fn new_topic(name: &str, partitions: i32, replication: i16) -> NewTopic {
    NewTopic {
        name: name.into(),
        num_partitions: partitions,
        replication_factor: replication,
        configs: vec![("retention.ms".into(), Some("1000".into()))],
        replica_assignment: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brokers_and_controller_come_from_the_image_and_the_quorum() {
    let node = node(3);
    let cluster = node.metadata.cluster("PLAINTEXT");
    assert_eq!(cluster.cluster_id, "cluster-1");
    assert_eq!(cluster.controller_id, 1);
    let ids: Vec<i32> = cluster.brokers.iter().map(|b| b.id).collect();
    assert_eq!(ids, [1, 2, 3]);
    assert_eq!(cluster.brokers[1].port, 9093);
    // Another listener: that listener's endpoints.
    assert_eq!(
        node.metadata.cluster("INTERNAL").brokers[2].host,
        "10.0.0.3"
    );
    // A fenced broker is not shown.
    let epoch = node.quorum.image().cluster().broker(2).unwrap().epoch;
    node.quorum
        .apply(&Command::FenceBroker {
            broker_id: 2,
            epoch,
        })
        .unwrap();
    let ids: Vec<i32> = node
        .metadata
        .cluster("PLAINTEXT")
        .brokers
        .iter()
        .map(|b| b.id)
        .collect();
    assert_eq!(ids, [1, 3]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_topic_places_replicas_over_the_live_brokers() {
    let node = node(3);
    let created = node
        .metadata
        .create_topic(&new_topic("orders", 3, 3), false)
        .unwrap();
    assert_eq!(created.partitions.len(), 3);
    let mut leaders: Vec<i32> = created.partitions.iter().map(|p| p.leader).collect();
    leaders.sort_unstable();
    assert_eq!(leaders, [1, 2, 3], "leaders spread over the brokers");
    for p in &created.partitions {
        let mut replicas = p.replicas.clone();
        replicas.sort_unstable();
        assert_eq!(replicas, [1, 2, 3]);
        assert_eq!(p.isr, p.replicas);
        assert!(p.offline_replicas.is_empty());
    }
    // Visible through every read of the seam, with its configs.
    assert_eq!(node.metadata.topic("orders"), Some(created.clone()));
    assert_eq!(node.metadata.topic_by_id(created.id), Some(created.clone()));
    let image = node.quorum.image();
    let configs = image
        .configs()
        .get(&crate::cluster::command::ConfigResource::Topic(
            "orders".into(),
        ));
    assert_eq!(
        configs.get("retention.ms").map(String::as_str),
        Some("1000")
    );

    // Beyond the live brokers: INVALID_REPLICATION_FACTOR, decided again
    // after one read barrier (a NoOp), and no topic proposed.
    let before = node.quorum.image().last_applied();
    let error = node
        .metadata
        .create_topic(&new_topic("wide", 1, 4), false)
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::InvalidReplicationFactor.code());
    assert_eq!(node.quorum.image().last_applied(), before + 1);
    assert!(node.quorum.image().topic("wide").is_none());
    // The single node's validation still applies.
    let error = node
        .metadata
        .create_topic(&new_topic("bad name", 1, 1), false)
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::InvalidTopicException.code());
    let error = node
        .metadata
        .create_topic(&new_topic("orders", 1, 1), false)
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::TopicAlreadyExists.code());
    // validate_only decides but proposes nothing.
    let checked = node
        .metadata
        .create_topic(&new_topic("dry", 2, 2), true)
        .unwrap();
    assert_eq!(checked.partitions.len(), 2);
    assert_eq!(node.metadata.topic("dry"), None);
    assert_eq!(node.quorum.image().last_applied(), before + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_partitions_and_delete_go_through_the_quorum() {
    let node = node(3);
    node.metadata
        .create_topic(&new_topic("t", 1, 2), false)
        .unwrap();
    let grown = node
        .metadata
        .create_partitions("t", 3, Some(&[vec![3, 1], vec![2, 3]]), false)
        .unwrap();
    assert_eq!(grown.partitions.len(), 3);
    assert_eq!(grown.partitions[1].replicas, [3, 1]);
    assert_eq!(grown.partitions[2].leader, 2);
    let error = node
        .metadata
        .create_partitions("t", 4, Some(&[vec![9, 1]]), false)
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::InvalidReplicaAssignment.code());
    let id = node.metadata.delete_topic("t").unwrap();
    assert_eq!(id, grown.id);
    assert_eq!(node.metadata.topic("t"), None);
    let error = node.metadata.delete_topic("t").unwrap_err();
    assert_eq!(error.code, ErrorCode::UnknownTopicOrPartition.code());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leadership_and_the_reconciler_follow_the_image() {
    let node = node(3);
    let image_quorum: Arc<dyn Quorum<MetadataImage>> = node.quorum.clone();
    let leadership = ImageLeadership {
        quorum: image_quorum,
        node_id: 1,
    };
    node.metadata
        .create_partitions("absent", 2, None, false)
        .unwrap_err();
    node.quorum
        .apply(&Command::CreateTopic(
            crate::cluster::command::NewTopicRecord {
                name: "t".into(),
                id: Uuid(77),
                partitions: vec![
                    crate::cluster::command::PartitionRecord {
                        partition: 0,
                        replicas: vec![1, 2],
                        isr: vec![1, 2],
                        leader: 1,
                    },
                    crate::cluster::command::PartitionRecord {
                        partition: 1,
                        replicas: vec![2, 3],
                        isr: vec![2, 3],
                        leader: 2,
                    },
                ],
                configs: Default::default(),
            },
        ))
        .unwrap();
    assert!(leadership.leads("t", 0));
    assert!(!leadership.leads("t", 1));
    // Unknown to the image: left to the log (UNKNOWN_TOPIC_OR_PARTITION).
    assert!(leadership.leads("t", 7));
    assert!(leadership.leads("other", 0));

    let image = node.quorum.image();
    let plan = reconciler::plan(
        &image,
        1,
        &node.topics.list(),
        &node.topics.local_partitions(),
    );
    assert_eq!(plan.adopt.len(), 1);
    assert_eq!(
        plan.adopt[0].1,
        [0],
        "only the partitions with a replica here"
    );
    reconciler::apply(plan, &node.topics, &|_| {});
    let local = node.topics.get("t").unwrap();
    assert_eq!((local.id, local.partitions), (77, 2));
    assert!(reconciler::plan(
        &image,
        1,
        &node.topics.list(),
        &node.topics.local_partitions()
    )
    .is_empty());

    node.quorum
        .apply(&Command::DeleteTopic { topic_id: Uuid(77) })
        .unwrap();
    let plan = reconciler::plan(
        &node.quorum.image(),
        1,
        &node.topics.list(),
        &node.topics.local_partitions(),
    );
    assert_eq!(plan.forget, ["t"]);
    let deleted = std::sync::Mutex::new(Vec::new());
    reconciler::apply(plan, &node.topics, &|name| {
        deleted.lock().unwrap().push(name.to_string())
    });
    assert_eq!(node.topics.get("t"), None);
    assert_eq!(*deleted.lock().unwrap(), ["t"]);
}

/// A follower's view of the quorum that lags: it shows the image as of
/// its own last proposal (answered once applied here), not the commits
/// the leader applied since.
struct Lagging {
    quorum: Arc<dyn Quorum<MetadataImage>>,
    shown: std::sync::Mutex<Arc<MetadataImage>>,
}

impl Quorum<MetadataImage> for Lagging {
    fn propose(
        &self,
        command: Command,
    ) -> crate::cluster::quorum::Proposal<'_, crate::cluster::command::Response> {
        Box::pin(async move {
            let response = self.quorum.propose(command).await;
            *crate::sync::lock(&self.shown) = self.quorum.image();
            response
        })
    }

    fn image(&self) -> Arc<MetadataImage> {
        Arc::clone(&crate::sync::lock(&self.shown))
    }

    fn watch(&self) -> tokio::sync::watch::Receiver<crate::cluster::quorum::Applied> {
        self.quorum.watch()
    }

    fn leader(&self) -> Option<crate::cluster::quorum::NodeId> {
        self.quorum.leader()
    }
}

/// The node saw one broker; two more registered since at the controller.
/// CreateTopics with RF 3 and CreatePartitions place over all three, as
/// the controller (which Kafka asks) would, instead of refusing with
/// INVALID_REPLICATION_FACTOR on the node's stale image.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placement_on_a_lagging_image_is_decided_again_after_a_read_barrier() {
    let node = node_seeing(1, |quorum| {
        let shown = std::sync::Mutex::new(quorum.image());
        Arc::new(Lagging { quorum, shown })
    });
    for id in 2..=3 {
        let Ok(Applied::BrokerRegistered { epoch }) = node
            .quorum
            .apply(&Command::RegisterBroker(registration(id, id as u128)))
        else {
            panic!("registration refused");
        };
        node.quorum
            .apply(&Command::UnfenceBroker {
                broker_id: id,
                epoch,
            })
            .unwrap();
    }
    assert_eq!(node.metadata.cluster("PLAINTEXT").brokers.len(), 1);
    let created = node
        .metadata
        .create_topic(&new_topic("late", 2, 3), false)
        .unwrap();
    for p in &created.partitions {
        let mut replicas = p.replicas.clone();
        replicas.sort_unstable();
        assert_eq!(replicas, [1, 2, 3]);
    }
    assert_eq!(node.metadata.cluster("PLAINTEXT").brokers.len(), 3);
    let grown = node
        .metadata
        .create_partitions("late", 3, None, false)
        .unwrap();
    assert_eq!(grown.partitions.len(), 3);
    // Still too many for the cluster after the barrier: refused.
    let error = node
        .metadata
        .create_topic(&new_topic("wider", 1, 4), false)
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::InvalidReplicationFactor.code());
}
