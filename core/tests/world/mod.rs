//! The deterministic world of the in-memory tests: a [`MemoryCluster`] whose
//! waits and lease instants run on a [`ManualClock`]. No test waits on real
//! time: tasks run on a current-thread runtime and [`settle`] lets every ready
//! task run before the clock moves.
//!
//! Every claim about Kafka's own behaviour is tested against a real broker
//! in the `kafka_*` tests; the tests on this world test our rules.
#![allow(dead_code)]

pub mod hooked;

use std::sync::Arc;
use std::time::Duration;

use krabka_coordination::codec::{encode_key, encode_registration, Key, Registration};
use krabka_coordination::events::{Event, EventReceiver};
use krabka_coordination::leadership::{
    acquire_leadership, describe_role_state, Leadership, LeadershipOptions,
};
use krabka_coordination::transport::memory::{MemoryCluster, MemoryTransport};
use krabka_coordination::transport::{Registrar, StateRecord, Transport};
use krabka_coordination::{role_partition, Clock, Error, ManualClock, Record, STATE_TOPIC};
use tokio::task::JoinHandle;

/// The clock's start (epoch ms).
pub const T0: i64 = 1_700_000_000_000;
/// The lease of every member unless a test says otherwise.
pub const LEASE: Duration = Duration::from_secs(30);
/// The renew interval.
pub const RENEW: Duration = Duration::from_secs(10);
/// The challenge stagger.
pub const STAGGER: Duration = Duration::from_secs(5);
/// The role most tests elect.
pub const ROLE: &str = "billing-export";
/// The partition count of the state topic.
pub const PARTITIONS: i32 = 16;

/// `d` in milliseconds.
pub fn ms(d: Duration) -> i64 {
    d.as_millis() as i64
}

/// A manual clock and an in-memory cluster on it.
pub struct World {
    pub clock: ManualClock,
    pub cluster: MemoryCluster,
}

impl World {
    pub fn new() -> Self {
        let clock = ManualClock::new(T0);
        let cluster = MemoryCluster::new(Arc::new(clock.clone()));
        World { clock, cluster }
    }

    /// The test options: [`PARTITIONS`], [`LEASE`], [`RENEW`], [`STAGGER`],
    /// the manual clock, one-second polls.
    pub fn options(&self) -> LeadershipOptions {
        LeadershipOptions::default()
            .with_partitions(PARTITIONS)
            .with_lease_duration(LEASE)
            .with_renew_interval(RENEW)
            .with_challenge_stagger(STAGGER)
            .with_clock(Arc::new(self.clock.clone()))
            .with_poll_wait(Duration::from_secs(1))
    }

    /// A new transport handle (a new process) on the cluster.
    pub fn transport(&self) -> Arc<MemoryTransport> {
        Arc::new(self.cluster.transport())
    }

    /// `member` acquires [`ROLE`] on a transport of its own, in a task.
    pub fn spawn(&self, member: &str) -> JoinHandle<Result<Leadership, Error>> {
        self.spawn_with(member, self.options())
    }

    /// [`World::spawn`] with other options.
    pub fn spawn_with(
        &self,
        member: &str,
        options: LeadershipOptions,
    ) -> JoinHandle<Result<Leadership, Error>> {
        spawn_on(self.transport(), member, options)
    }

    /// Registers `member` without running it: a member that died while waiting.
    pub async fn ghost(&self, member: &str) {
        let value = encode_registration(&Registration {
            member: member.into(),
            registered_at: T0,
        })
        .unwrap();
        self.transport()
            .append(StateRecord {
                partition: self.partition(),
                key: encode_key(&Key::registration(ROLE, member)).unwrap(),
                value: Some(value),
            })
            .await
            .unwrap();
    }

    /// Moves the clock to `at` in steps of at most one second (each poll
    /// waits a second), letting every task run at every step.
    pub async fn run_until(&self, at: i64) {
        settle().await;
        while self.clock.now_millis() < at {
            let step = (at - self.clock.now_millis()).min(1_000);
            self.clock.advance(Duration::from_millis(step as u64));
            settle().await;
        }
    }

    /// The roster of [`ROLE`], in rank order.
    pub async fn ranks(&self) -> Vec<String> {
        describe_role_state(self.transport().as_ref(), ROLE, PARTITIONS)
            .await
            .unwrap()
            .roster
            .into_iter()
            .map(|e| e.member)
            .collect()
    }

    /// The partition of [`ROLE`].
    pub fn partition(&self) -> i32 {
        role_partition(ROLE, PARTITIONS).unwrap()
    }

    /// The committed records of [`ROLE`]'s partition.
    pub fn state_log(&self) -> Vec<Record> {
        self.cluster.committed(STATE_TOPIC, self.partition())
    }
}

/// `member` acquires [`ROLE`] on `transport`, in a task.
pub fn spawn_on(
    transport: Arc<dyn Transport>,
    member: &str,
    options: LeadershipOptions,
) -> JoinHandle<Result<Leadership, Error>> {
    let member = member.to_owned();
    tokio::spawn(async move { acquire_leadership(transport, ROLE, &member, options).await })
}

/// Lets every ready task run to its next wait.
pub async fn settle() {
    for _ in 0..200 {
        tokio::task::yield_now().await;
    }
}

/// The leadership an acquire task won; it must have finished.
pub async fn leader(h: JoinHandle<Result<Leadership, Error>>) -> Leadership {
    assert!(h.is_finished(), "the member should hold the role by now");
    h.await.unwrap().unwrap()
}

/// Every event delivered so far.
pub fn drain(rx: &mut EventReceiver) -> Vec<Event> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        out.push(e);
    }
    out
}

/// The stable names of `events`, in order.
pub fn names(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(|e| e.kind.name()).collect()
}

/// A guarded record of the `orders` topic, partition 0.
pub fn order(value: &str) -> krabka_coordination::transport::OutRecord {
    krabka_coordination::transport::OutRecord {
        topic: "orders".into(),
        partition: Some(0),
        key: Some(value.as_bytes().to_vec()),
        value: Some(value.as_bytes().to_vec()),
        headers: vec![],
    }
}

/// The values committed to `orders`/0.
pub fn orders(w: &World) -> Vec<String> {
    w.cluster
        .committed("orders", 0)
        .into_iter()
        .map(|r| String::from_utf8(r.value.unwrap()).unwrap())
        .collect()
}
