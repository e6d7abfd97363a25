//! The leader's state against a real partition log and a scripted image.

use super::*;
use crate::log::batch_testing::simple_batch;
use crate::log::manager::LogManager;
use crate::log::LogConfig;

/// An image with one partition, changed by the test.
struct Image(Mutex<PartitionInfo>, usize);

impl PartitionSource for Image {
    fn partition(&self, _: &TopicPartition) -> Option<PartitionInfo> {
        Some(lock(&self.0).clone())
    }
    fn led_by(&self, node: i32) -> Vec<(TopicPartition, PartitionInfo)> {
        let info = lock(&self.0).clone();
        (info.leader == node)
            .then(|| (tp(), info))
            .into_iter()
            .collect()
    }
    fn min_insync_replicas(&self, _: &str) -> usize {
        self.1
    }
    fn may_join_isr(&self, _: i32) -> bool {
        true
    }
}

fn tp() -> TopicPartition {
    TopicPartition::new("t", 0)
}

struct Fixture {
    _dir: tempfile::TempDir,
    logs: Arc<LogManager>,
    image: Arc<Image>,
    leader: Arc<LeaderReplication>,
    changes: mpsc::UnboundedReceiver<IsrChange>,
}

fn fixture(isr: &[i32], lag: Duration) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let logs = Arc::new(LogManager::open(dir.path()).unwrap());
    logs.create_partition(&tp(), LogConfig::default()).unwrap();
    let image = Arc::new(Image(
        Mutex::new(PartitionInfo {
            topic_id: 7,
            leader: 1,
            leader_epoch: 3,
            partition_epoch: 10,
            replicas: vec![1, 2, 3],
            isr: isr.to_vec(),
        }),
        2,
    ));
    let (alter, changes) = mpsc::unbounded_channel();
    let leader = Arc::new(LeaderReplication::new(
        1,
        image.clone(),
        logs.clone(),
        Arc::new(FetchPurgatory::default()),
        lag,
        alter,
    ));
    Fixture {
        _dir: dir,
        logs,
        image,
        leader,
        changes,
    }
}

impl Fixture {
    /// Appends `n` records; the new log end offset.
    fn append(&self, n: usize) -> i64 {
        let info = self.logs.append(&tp(), &simple_batch(n, 10, 1), 1).unwrap();
        info.last_offset + 1
    }

    fn hw(&self) -> i64 {
        self.leader.high_watermark(&tp()).unwrap()
    }

    fn commit_isr(&self, isr: &[i32]) {
        let mut info = lock(&self.image.0);
        info.isr = isr.to_vec();
        info.partition_epoch += 1;
    }
}

#[test]
fn alone_in_the_isr_the_watermark_is_the_log_end() {
    let fx = fixture(&[1], DEFAULT_LAG_TIME_MAX);
    let end = fx.append(5);
    assert_eq!(fx.hw(), end);
    assert!(!fx.leader.must_wait(&tp(), end), "nothing to wait for");
}

#[test]
fn the_watermark_follows_the_slowest_isr_member() {
    let fx = fixture(&[1, 2, 3], DEFAULT_LAG_TIME_MAX);
    let end = fx.append(10);
    assert_eq!(fx.hw(), 0, "followers have not fetched");
    assert!(fx.leader.must_wait(&tp(), end));
    assert_eq!(
        fx.leader
            .follower_fetched(&tp(), 2, 10)
            .unwrap()
            .high_watermark,
        0
    );
    assert_eq!(
        fx.leader
            .follower_fetched(&tp(), 3, 4)
            .unwrap()
            .high_watermark,
        4
    );
    assert_eq!(
        fx.leader
            .follower_fetched(&tp(), 3, 10)
            .unwrap()
            .high_watermark,
        10
    );
    // A follower fetching from an older offset again does not move it back.
    assert_eq!(
        fx.leader
            .follower_fetched(&tp(), 3, 6)
            .unwrap()
            .high_watermark,
        10
    );
    assert_eq!(
        fx.leader.follower_fetched(&tp(), 9, 6),
        Err(ErrorCode::NotLeaderOrFollower),
        "not a replica"
    );
}

#[test]
fn a_dry_run_view_of_a_follower_fetch_moves_nothing() {
    let fx = fixture(&[1, 2, 3], DEFAULT_LAG_TIME_MAX);
    fx.append(10);
    fx.leader.follower_fetched(&tp(), 2, 4).unwrap();
    assert_eq!(fx.hw(), 0, "follower 3 has not fetched");
    // What a shadow's copy of follower 3's fetch at 10 sees: the
    // watermark, while follower 3 stays unfetched and the watermark put.
    assert_eq!(
        fx.leader.follower_view(&tp(), 3),
        Ok(FollowerFetch { high_watermark: 0 })
    );
    assert_eq!(fx.hw(), 0, "a dry run moved the watermark");
    assert_eq!(
        fx.leader.follower_view(&tp(), 9),
        Err(ErrorCode::NotLeaderOrFollower),
        "not a replica"
    );
    // The real fetch moves it.
    assert_eq!(
        fx.leader
            .follower_fetched(&tp(), 3, 10)
            .unwrap()
            .high_watermark,
        4
    );
    assert_eq!(
        fx.leader.follower_view(&tp(), 2),
        Ok(FollowerFetch { high_watermark: 4 })
    );
}

#[test]
fn an_out_of_sync_follower_is_proposed_out_and_rejoins_once_caught_up() {
    let mut fx = fixture(&[1, 2, 3], Duration::from_millis(50));
    fx.append(10);
    fx.leader.follower_fetched(&tp(), 2, 10).unwrap();
    fx.leader.follower_fetched(&tp(), 3, 10).unwrap();
    fx.append(5);
    std::thread::sleep(Duration::from_millis(80));
    fx.leader.follower_fetched(&tp(), 2, 15).unwrap();
    fx.leader.shrink_out_of_sync();
    let change = fx.changes.try_recv().expect("a shrink");
    assert_eq!(change.new_isr, vec![1, 2]);
    assert_eq!(
        (change.leader_epoch, change.partition_epoch, change.topic_id),
        (3, 10, 7)
    );
    fx.leader.shrink_out_of_sync();
    assert!(fx.changes.try_recv().is_err(), "one change in flight");
    // Pending, the watermark still waits for 3 (the maximal ISR).
    assert_eq!(fx.hw(), 10);
    fx.commit_isr(&[1, 2]);
    assert_eq!(fx.hw(), 15, "committed: 3 no longer counts");
    assert_eq!(fx.leader.isr_size(&tp()), Some(2));

    fx.leader.follower_fetched(&tp(), 3, 12).unwrap();
    assert!(fx.changes.try_recv().is_err(), "below the watermark");
    fx.leader.follower_fetched(&tp(), 3, 15).unwrap();
    let change = fx.changes.try_recv().expect("an expansion");
    assert_eq!(
        (change.new_isr, change.partition_epoch),
        (vec![1, 2, 3], 11)
    );
}

#[test]
fn a_refused_change_may_be_decided_again() {
    let mut fx = fixture(&[1, 2], Duration::from_millis(20));
    // Leading from now: follower 2, never heard from, is out of sync
    // once the lag time has passed.
    assert_eq!(fx.leader.high_watermark(&tp()), Some(0));
    std::thread::sleep(Duration::from_millis(40));
    fx.leader.shrink_out_of_sync();
    let change = fx.changes.try_recv().expect("a shrink");
    fx.leader.change_failed(&change);
    fx.leader.shrink_out_of_sync();
    assert_eq!(fx.changes.try_recv().unwrap(), change);
}

#[test]
fn a_new_leader_epoch_starts_afresh() {
    let fx = fixture(&[1, 2], DEFAULT_LAG_TIME_MAX);
    fx.append(4);
    fx.leader.follower_fetched(&tp(), 2, 4).unwrap();
    assert_eq!(fx.hw(), 4);
    {
        let mut info = lock(&fx.image.0);
        info.leader = 2;
        info.leader_epoch += 1;
    }
    assert_eq!(fx.leader.high_watermark(&tp()), None, "not the leader");
    {
        let mut info = lock(&fx.image.0);
        info.leader = 1;
        info.leader_epoch += 1;
    }
    assert_eq!(fx.hw(), 0, "follower 2 unknown to this epoch");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_all_waits_for_the_isr() {
    let fx = fixture(&[1, 2], DEFAULT_LAG_TIME_MAX);
    let end = fx.append(3);
    let leader = Arc::clone(&fx.leader);
    let wait = tokio::spawn(async move {
        leader
            .await_replicated(&tp(), end, 2, Duration::from_secs(5))
            .await
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!wait.is_finished());
    fx.leader.follower_fetched(&tp(), 2, end).unwrap();
    assert_eq!(wait.await.unwrap(), ErrorCode::None);

    let end = fx.append(1);
    let timed_out = fx
        .leader
        .await_replicated(&tp(), end, 2, Duration::from_millis(50))
        .await;
    assert_eq!(timed_out, ErrorCode::RequestTimedOut);

    // The ISR shrinks to the leader: the write is committed, but by
    // fewer replicas than min.insync.replicas asks.
    fx.commit_isr(&[1]);
    let after = fx
        .leader
        .await_replicated(&tp(), end, 2, Duration::from_secs(1))
        .await;
    assert_eq!(after, ErrorCode::NotEnoughReplicasAfterAppend);
}
