//! Quorum tests: real nodes on loopback TCP with a tiny state machine (a
//! journal of the commands applied, with their log index).

use std::path::{Path, PathBuf};
use std::time::Duration;

use openraft::storage::RaftLogStorage;
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio::time::Instant;

use super::log_store::LogStore;
use super::state_machine::StateMachineStore;
use super::{QuorumConfig, RaftQuorum, Voter};
use crate::cluster::quorum::{NodeId, Quorum, StateMachine};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Journal {
    entries: Vec<(u64, String)>,
}

impl StateMachine for Journal {
    type Command = String;
    type Response = usize;

    fn apply(&mut self, index: u64, command: &String) -> usize {
        self.entries.push((index, command.clone()));
        self.entries.len()
    }
}

impl Journal {
    fn commands(&self) -> Vec<&str> {
        self.entries
            .iter()
            .map(|(_, command)| command.as_str())
            .collect()
    }
}

const WAIT: Duration = Duration::from_secs(8);

struct Cluster {
    dir: tempfile::TempDir,
    voters: Vec<Voter>,
    nodes: Vec<Option<RaftQuorum<Journal>>>,
    tweak: fn(&mut QuorumConfig),
}

fn fast(config: &mut QuorumConfig) {
    config.heartbeat_interval = Duration::from_millis(50);
    config.election_timeout_min = Duration::from_millis(300);
    config.election_timeout_max = Duration::from_millis(600);
    config.propose_timeout = Duration::from_secs(5);
}

impl Cluster {
    async fn start(size: u64, tweak: fn(&mut QuorumConfig)) -> Self {
        let mut listeners = Vec::new();
        for _ in 0..size {
            listeners.push(TcpListener::bind("127.0.0.1:0").await.unwrap());
        }
        let voters = (1..=size)
            .zip(&listeners)
            .map(|(id, listener)| Voter {
                id,
                addr: listener.local_addr().unwrap().to_string(),
            })
            .collect();
        let mut cluster = Self {
            dir: tempfile::tempdir().unwrap(),
            voters,
            nodes: Vec::new(),
            tweak,
        };
        for (id, listener) in (1..=size).zip(listeners) {
            let node = RaftQuorum::start_on(cluster.config(id), listener)
                .await
                .unwrap();
            cluster.nodes.push(Some(node));
        }
        cluster
    }

    fn node_dir(&self, id: NodeId) -> PathBuf {
        self.dir.path().join(format!("node-{id}"))
    }

    fn config(&self, id: NodeId) -> QuorumConfig {
        let mut config = QuorumConfig::new(id, self.voters.clone(), self.node_dir(id));
        fast(&mut config);
        (self.tweak)(&mut config);
        config
    }

    fn node(&self, id: NodeId) -> &RaftQuorum<Journal> {
        self.nodes[id as usize - 1].as_ref().unwrap()
    }

    fn live(&self) -> impl Iterator<Item = &RaftQuorum<Journal>> {
        self.nodes.iter().flatten()
    }

    async fn stop(&mut self, id: NodeId) {
        if let Some(node) = self.nodes[id as usize - 1].take() {
            node.shutdown().await;
        }
    }

    /// Restarts a stopped node from its directory, on its voter address.
    async fn restart(&mut self, id: NodeId) {
        let node = RaftQuorum::start(self.config(id)).await.unwrap();
        self.nodes[id as usize - 1] = Some(node);
    }

    /// The leader every live node agrees on.
    async fn leader(&self) -> NodeId {
        let deadline = Instant::now() + WAIT;
        loop {
            let leaders: Vec<_> = self.live().map(|node| node.leader()).collect();
            if let Some(Some(leader)) = leaders.first() {
                let live = self.nodes[*leader as usize - 1].is_some();
                if live && leaders.iter().all(|other| other == &Some(*leader)) {
                    return *leader;
                }
            }
            assert!(Instant::now() < deadline, "no agreed leader: {leaders:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn follower(&self, leader: NodeId) -> NodeId {
        self.live()
            .map(|node| node.node_id())
            .filter(|id| *id != leader)
            .max()
            .unwrap()
    }

    /// Waits until every live node applied what `id` applied.
    async fn converge(&self, id: NodeId) -> Journal {
        let target = self.node(id).watch().borrow().index;
        for node in self.live() {
            let mut applied = node.watch();
            tokio::time::timeout(WAIT, applied.wait_for(|applied| applied.index >= target))
                .await
                .unwrap_or_else(|_| panic!("node {} did not reach index {target}", node.node_id()))
                .unwrap();
        }
        let image = self.node(id).image();
        for node in self.live() {
            assert_eq!(*node.image(), *image, "node {} diverged", node.node_id());
        }
        (*image).clone()
    }

    /// Proposes `command` on node `id`, which must accept it.
    async fn propose(&self, id: NodeId, command: impl Into<String>) {
        self.node(id).propose(command.into()).await.unwrap();
    }

    /// Three nodes that applied `{prefix}0` to `{prefix}4`: the cluster,
    /// its leader and a follower.
    async fn with_five_applied(prefix: &str) -> (Self, NodeId, NodeId) {
        let cluster = Cluster::start(3, |_| {}).await;
        let leader = cluster.leader().await;
        let follower = cluster.follower(leader);
        for n in 0..5 {
            cluster.propose(leader, format!("{prefix}{n}")).await;
        }
        cluster.converge(leader).await;
        (cluster, leader, follower)
    }

    async fn shutdown(mut self) {
        for id in 1..=self.nodes.len() as u64 {
            self.stop(id).await;
        }
    }
}

fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir.join("log"))
        .unwrap()
        .map(|item| item.unwrap().path())
        .collect();
    files.sort();
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_elect_a_leader_and_follower_proposals_apply_everywhere_in_order() {
    let cluster = Cluster::start(3, |_| {}).await;
    let leader = cluster.leader().await;
    let follower = cluster.follower(leader);
    for n in 1..=5 {
        let command = format!("from follower {n}");
        let count = cluster
            .node(follower)
            .propose(command.clone())
            .await
            .unwrap();
        assert_eq!(count, n);
        // Applied on the proposing node when the proposal returns.
        assert_eq!(
            cluster.node(follower).image().commands().last(),
            Some(&command.as_str())
        );
    }
    // Concurrent proposals from every node.
    let proposals = (1..=3u64).flat_map(|id| {
        let node = cluster.node(id);
        (0..3).map(move |n| node.propose(format!("node {id} #{n}")))
    });
    for response in futures_util::future::join_all(proposals).await {
        response.unwrap();
    }
    let journal = cluster.converge(leader).await;
    assert_eq!(journal.entries.len(), 14);
    assert_eq!(
        journal.commands()[..5],
        [
            "from follower 1",
            "from follower 2",
            "from follower 3",
            "from follower 4",
            "from follower 5"
        ]
    );
    assert!(journal.entries.windows(2).all(|pair| pair[0].0 < pair[1].0));
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_the_leader_stops_another_is_elected_and_proposals_continue() {
    let mut cluster = Cluster::start(3, |_| {}).await;
    let leader = cluster.leader().await;
    cluster.propose(leader, "before").await;
    cluster.converge(leader).await;
    let stopped = Instant::now();
    cluster.stop(leader).await;
    let new_leader = cluster.leader().await;
    let elected = stopped.elapsed();
    assert_ne!(new_leader, leader);
    let follower = cluster.follower(new_leader);
    cluster.propose(follower, "after").await;
    let journal = cluster.converge(new_leader).await;
    assert_eq!(journal.commands(), ["before", "after"]);
    eprintln!("new leader elected {elected:?} after the leader stopped");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_recovers_its_log_and_catches_up() {
    let (mut cluster, leader, follower) = Cluster::with_five_applied("a").await;
    let logged = cluster.node(follower).metrics().last_log_index.unwrap();
    cluster.stop(follower).await;
    // Its log and vote are on disk.
    let mut log = LogStore::<Journal>::open(&cluster.node_dir(follower), 1 << 20).unwrap();
    let state = log.get_log_state().await.unwrap();
    assert_eq!(state.last_log_id.map(|log_id| log_id.index), Some(logged));
    assert!(log.read_vote().await.unwrap().is_some());
    drop(log);
    for n in 0..5 {
        cluster.propose(leader, format!("b{n}")).await;
    }
    cluster.restart(follower).await;
    let journal = cluster.converge(leader).await;
    assert_eq!(journal.entries.len(), 10);
    // A restart of the node that formed the cluster does not form another.
    cluster.stop(1).await;
    cluster.restart(1).await;
    cluster.propose(1, "after restarts").await;
    let leader = cluster.leader().await;
    assert_eq!(cluster.converge(leader).await.entries.len(), 11);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_log_tail_is_cut_and_the_node_catches_up() {
    let (mut cluster, leader, follower) = Cluster::with_five_applied("c").await;
    cluster.stop(follower).await;
    // A torn write: the last record lost its tail.
    let last = segment_files(&cluster.node_dir(follower)).pop().unwrap();
    let len = std::fs::metadata(&last).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&last)
        .unwrap()
        .set_len(len - 3)
        .unwrap();
    cluster.restart(follower).await;
    cluster.propose(leader, "after the tear").await;
    let journal = cluster.converge(leader).await;
    assert_eq!(journal.entries.len(), 6);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_bound_the_log_and_a_wiped_node_rejoins_by_snapshot() {
    let mut cluster = Cluster::start(3, |config| {
        config.snapshot_interval_entries = 10;
        config.entries_kept_after_snapshot = 0;
        config.segment_bytes = 1024;
    })
    .await;
    let leader = cluster.leader().await;
    for n in 0..45 {
        cluster
            .propose(leader, format!("entry {n:03} with some padding"))
            .await;
    }
    cluster.converge(leader).await;
    let deadline = Instant::now() + WAIT;
    while cluster
        .node(leader)
        .metrics()
        .purged
        .is_none_or(|purged| purged.index < 30)
    {
        assert!(
            Instant::now() < deadline,
            "no purge: {:?}",
            cluster.node(leader).metrics()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let metrics = cluster.node(leader).metrics();
    assert!(metrics
        .snapshot
        .is_some_and(|snapshot| snapshot.index >= 30));
    let segments = segment_files(&cluster.node_dir(leader));
    assert!(segments.len() <= 3, "log not bounded: {segments:?}");
    assert!(!segments
        .iter()
        .any(|path| path.ends_with("00000000000000000000.log")));
    assert!(cluster.node_dir(leader).join("snapshot.bin").exists());

    // A node whose disk was lost comes back empty and gets the snapshot.
    let wiped = cluster.follower(leader);
    cluster.stop(wiped).await;
    std::fs::remove_dir_all(cluster.node_dir(wiped)).unwrap();
    for n in 0..3 {
        cluster.propose(leader, format!("while wiped {n}")).await;
    }
    cluster.restart(wiped).await;
    let journal = cluster.converge(leader).await;
    assert_eq!(journal.entries.len(), 48);
    // The image comes from the installed snapshot; openraft publishes its
    // metrics of the install a moment later.
    let deadline = Instant::now() + WAIT;
    loop {
        let metrics = cluster.node(wiped).metrics();
        let installed =
            metrics.snapshot.is_some() && metrics.purged.is_some_and(|purged| purged.index >= 30);
        if installed {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no snapshot installed: {metrics:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_bad_voter_list_is_an_error_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let voter = |id: NodeId, port: u16| Voter {
        id,
        addr: format!("127.0.0.1:{port}"),
    };
    let start = |config: QuorumConfig| async move {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        match RaftQuorum::<Journal>::start_on(config, listener).await {
            Ok(_) => panic!("started"),
            Err(error) => error.to_string(),
        }
    };
    let duplicate = QuorumConfig::new(
        1,
        vec![voter(1, 1), voter(2, 2), voter(1, 3)],
        dir.path().into(),
    );
    assert!(start(duplicate).await.contains("node id 1 is given twice"));
    let same_addr = QuorumConfig::new(1, vec![voter(1, 1), voter(2, 1)], dir.path().into());
    assert!(start(same_addr)
        .await
        .contains("address 127.0.0.1:1 is given twice"));
    let stranger = QuorumConfig::new(4, vec![voter(1, 1), voter(2, 2)], dir.path().into());
    assert!(start(stranger)
        .await
        .contains("node.id 4 is not one of controller.quorum.voters (1, 2)"));
}

#[tokio::test]
async fn a_corrupt_vote_or_snapshot_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("vote.json"), b"{\"leader_id\":").unwrap();
    let error = LogStore::<Journal>::open(dir.path(), 1024).err().unwrap();
    assert!(error.to_string().contains("vote.json"), "{error}");

    std::fs::write(dir.path().join("snapshot.bin"), b"GRGSNAP1 garbage").unwrap();
    let error = StateMachineStore::<Journal>::open(dir.path())
        .err()
        .unwrap();
    assert!(
        error
            .to_string()
            .contains("corrupt metadata snapshot: CRC mismatch"),
        "{error}"
    );
}
