use std::time::Duration;

use tokio::sync::watch;

use super::*;
use crate::cluster::memory_quorum::MemoryQuorum;
use crate::cluster::quorum::{NodeId, Proposal, QuorumError};
use crate::cluster::testing::registration;
use crate::config::BrokerConfig;
use crate::config_admin::{AlterEntry, AlterOp};
use crate::security::acl_store::{
    Operation, PatternFilter, PatternType, Permission, PermissionFilter, ResourceType as Acl,
};

struct Node {
    _dir: tempfile::TempDir,
    quorum: Arc<MemoryQuorum<MetadataImage>>,
    services: Arc<Services>,
}

fn services(dir: &tempfile::TempDir) -> Arc<Services> {
    let mut config = BrokerConfig::default();
    for pair in [
        format!("log.dirs={}", dir.path().display()),
        "sasl.bootstrap.users=admin:admin-secret".to_string(),
        "delegation.token.secret.key=secret".to_string(),
    ] {
        config.set_pair(&pair).unwrap();
    }
    Arc::new(Services::open(Arc::new(config)).unwrap())
}

/// Node 1 of a cluster on a quorum of one, its stores attached.
async fn node() -> Node {
    let dir = tempfile::tempdir().unwrap();
    let services = services(&dir);
    let quorum = Arc::new(MemoryQuorum::<MetadataImage>::new(1));
    let dyn_quorum: Arc<dyn Quorum<MetadataImage>> = quorum.clone();
    attach(dyn_quorum, 1, &services).await.unwrap();
    Node {
        _dir: dir,
        quorum,
        services,
    }
}

fn binding(principal: &str) -> AclBinding {
    AclBinding {
        resource_type: Acl::Topic,
        resource_name: "orders".into(),
        pattern_type: PatternType::Literal,
        principal: principal.into(),
        host: "*".into(),
        operation: Operation::Read,
        permission: Permission::Allow,
    }
}

/// Waits (a little) until the node's stores followed the image.
async fn eventually(what: &str, check: impl Fn() -> bool) {
    for _ in 0..200 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{what} never happened");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acl_changes_are_proposed_and_the_store_follows_the_log() {
    let node = node().await;
    let acls = &node.services.acls;
    let before = acls.generation();
    acls.create(vec![binding("User:alice")]).unwrap();
    assert_eq!(
        node.quorum.image().acls().bindings(),
        [binding("User:alice")]
    );
    assert_eq!(*acls.snapshot(), vec![binding("User:alice")]);
    assert!(
        acls.generation() > before,
        "the authorizer's cache refreshes"
    );

    // Another node's change reaches this store.
    node.quorum
        .apply(&Command::CreateAcls(vec![binding("User:bob")]))
        .unwrap();
    eventually("bob's ACL here", || acls.snapshot().len() == 2).await;

    let filter = AclFilter {
        resource_type: Acl::Topic,
        resource_name: Some("orders".into()),
        pattern: PatternFilter::Literal,
        principal: Some("User:alice".into()),
        host: Some("*".into()),
        operation: Operation::Read,
        permission: PermissionFilter::Allow,
    };
    let removed = acls.delete(&[filter]).unwrap();
    assert_eq!(removed, vec![vec![binding("User:alice")]]);
    assert_eq!(*acls.snapshot(), vec![binding("User:bob")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_tokens_and_quotas_go_through_the_log() {
    let node = node().await;
    // The bootstrap user was proposed when the stores were attached.
    let image = node.quorum.image();
    assert!(image.scram().get("admin", ScramMechanism::Sha512).is_some());
    let credentials = &node.services.credentials;
    eventually("the bootstrap user here", || {
        credentials.check_password("admin", "admin-secret")
    })
    .await;

    credentials
        .set_password("bob", "bob-secret", &ScramMechanism::ALL, MIN_ITERATIONS)
        .unwrap();
    assert!(node
        .quorum
        .image()
        .scram()
        .get("bob", ScramMechanism::Sha256)
        .is_some());
    assert!(credentials.check_password("bob", "bob-secret"));
    let missing = credentials.apply(vec![("carol".into(), ScramMechanism::Sha256, None)]);
    assert_eq!(missing, vec![Err(CredentialError::NotFound)]);

    let tokens = &node.services.tokens;
    let token = tokens.create("User:bob", "User:bob", &[], -1).unwrap();
    let logged = node.quorum.image().tokens().get(&token.token_id).cloned();
    assert_eq!(logged.as_ref(), Some(&token));
    tokens.expire("User:bob", &token.hmac, -1).unwrap();
    assert!(node.quorum.image().tokens().get(&token.token_id).is_none());
    assert!(tokens.list().is_empty());

    let quotas = &node.services.quotas;
    let entity = [("user".to_string(), Some("bob".to_string()))];
    let op = QuotaOp {
        key: "producer_byte_rate".into(),
        value: 1024.0,
        remove: false,
    };
    quotas
        .alter(&entity, std::slice::from_ref(&op), false)
        .unwrap();
    let entity: Entity = entity.into_iter().collect();
    let values = node.quorum.image().quotas().get(&entity).cloned();
    assert_eq!(
        values.and_then(|v| v.get("producer_byte_rate").copied()),
        Some(1024.0)
    );
    assert_eq!(quotas.entities().len(), 1);
    // Validation stays the store's: nothing is proposed.
    let bad = QuotaOp { value: -1.0, ..op };
    let at = node.quorum.image().last_applied();
    assert!(quotas
        .alter(&[("user".into(), None)], &[bad], false)
        .is_err());
    assert_eq!(node.quorum.image().last_applied(), at);
}

fn set(name: &str, value: &str) -> AlterEntry {
    AlterEntry {
        name: name.into(),
        op: AlterOp::Set,
        value: Some(value.into()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_changes_are_proposed_as_differences_and_followed() {
    let node = node().await;
    let configs = &node.services.configs;
    let entries = [set("log.retention.ms", "7200000")];
    configs
        .incremental_alter(ResourceType::Broker, "", &entries, false)
        .unwrap();
    let image = node.quorum.image();
    let default = image.configs().get(&ConfigResource::BrokerDefault);
    assert_eq!(
        default.get("log.retention.ms").map(String::as_str),
        Some("7200000")
    );
    let layers = node.services.dynamic.broker_layers();
    assert_eq!(layers.cluster_default, *default);
    // Validate-only and invalid changes propose nothing.
    let at = image.last_applied();
    configs
        .incremental_alter(ResourceType::Broker, "1", &entries, true)
        .unwrap();
    let bad = [set("log.retention.ms", "soon")];
    assert!(configs
        .incremental_alter(ResourceType::Broker, "1", &bad, false)
        .is_err());
    assert_eq!(node.quorum.image().last_applied(), at);

    // Another node's change to this broker's configs reaches its store.
    node.quorum
        .apply(&Command::AlterConfigs {
            resource: ConfigResource::Broker(1),
            changes: vec![("log.retention.ms".into(), Some("3600000".into()))],
            replace: false,
        })
        .unwrap();
    let dynamic = &node.services.dynamic;
    eventually("broker 1's config here", || {
        dynamic.broker_layers().per_broker.get("log.retention.ms") == Some(&"3600000".into())
    })
    .await;

    // A topic's configs go with the topic.
    let Ok(Applied::BrokerRegistered { epoch }) = node
        .quorum
        .apply(&Command::RegisterBroker(registration(1, 7)))
    else {
        panic!("registration refused");
    };
    let unfence = Command::UnfenceBroker {
        broker_id: 1,
        epoch,
    };
    node.quorum.apply(&unfence).unwrap();
    let topics = &node.services.topics;
    let request = crate::metadata::topics::NewTopic {
        name: "orders".into(),
        num_partitions: 1,
        replication_factor: 1,
        configs: Vec::new(),
        replica_assignment: Vec::new(),
    };
    let metadata = super::super::BrokerMetadata::new(
        node.quorum.clone(),
        1,
        "cluster".into(),
        Arc::clone(topics),
        Handle::current(),
    );
    crate::metadata::view::ClusterMetadata::create_topic(&metadata, &request, false).unwrap();
    configs
        .incremental_alter(
            ResourceType::Topic,
            "orders",
            &[set("segment.ms", "1000")],
            false,
        )
        .unwrap();
    let image = node.quorum.image();
    let topic = image.configs().get(&ConfigResource::Topic("orders".into()));
    assert_eq!(topic.get("segment.ms").map(String::as_str), Some("1000"));
    let here = topics.get("orders").map(|t| t.configs).unwrap_or_default();
    assert_eq!(here, *topic);
}

/// A quorum with no leader: every proposal fails at once.
struct Leaderless(watch::Sender<crate::cluster::quorum::Applied>);

impl Quorum<MetadataImage> for Leaderless {
    fn propose(&self, _: Command) -> Proposal<'_, Response> {
        Box::pin(async { Err(QuorumError::NoLeader) })
    }

    fn image(&self) -> Arc<MetadataImage> {
        Arc::default()
    }

    fn watch(&self) -> watch::Receiver<crate::cluster::quorum::Applied> {
        self.0.subscribe()
    }

    fn leader(&self) -> Option<NodeId> {
        None
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_quorum_is_answered_with_not_controller() {
    let dir = tempfile::tempdir().unwrap();
    let services = services(&dir);
    let quorum = Arc::new(Leaderless(watch::channel(Default::default()).0));
    attach(quorum, 1, &services).await.unwrap();
    let not_controller = ErrorCode::NotController.code();
    match services.acls.create(vec![binding("User:alice")]) {
        Err(AclChangeError::Log { code, .. }) => assert_eq!(code, not_controller),
        other => panic!("{other:?}"),
    }
    let entries = [set("log.retention.ms", "7200000")];
    let error = services
        .configs
        .incremental_alter(ResourceType::Broker, "", &entries, false)
        .unwrap_err();
    assert_eq!(error.code, not_controller);
    let quota = QuotaOp {
        key: "producer_byte_rate".into(),
        value: 1.0,
        remove: false,
    };
    let error = services
        .quotas
        .alter(&[("user".into(), None)], &[quota], false)
        .unwrap_err();
    assert_eq!(error.code, not_controller);
}
