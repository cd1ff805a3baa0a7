//! The core [`Client`] on the in-memory transport:
//! one acquire of a role per client, options of the client's partition
//! count, and the claim on a role ending with the acquire or the term.
//! The client on a real Kafka is in `kafka_client`.

use crate::world;

use std::sync::Arc;

use krabka_coordination::client::Client;
use krabka_coordination::leadership::{Leadership, LeadershipOptions};
use krabka_coordination::transport::memory::MemoryTransport;
use krabka_coordination::transport::Coordinator;
use krabka_coordination::{role_partition, Error, ErrorKind, Result};
use tokio::task::JoinHandle;
use world::*;

/// A client on a transport of its own.
fn client(w: &World) -> (Client, Arc<MemoryTransport>) {
    let t = w.transport();
    (Client::from_transport(t.clone()), t)
}

/// `client.acquire(ROLE, member, options)` in a task.
fn spawn_acquire(
    client: &Client,
    member: &str,
    options: LeadershipOptions,
) -> JoinHandle<Result<Leadership>> {
    let (client, member) = (client.clone(), member.to_owned());
    tokio::spawn(async move { client.acquire(ROLE, &member, options).await })
}

/// Asserts `err` is the refusal of a second acquire of [`ROLE`].
fn assert_refused(err: &Error) {
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err:?}");
    assert!(
        err.to_string().contains(&format!("{ROLE:?}")),
        "the error names the role: {err}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_second_acquire_while_the_first_waits_is_refused_and_writes_nothing() {
    let w = World::new();
    let x = w.spawn("x");
    w.run_until(T0).await;
    let _x = leader(x).await;
    let (client, _) = client(&w);
    let first = spawn_acquire(&client, "a", w.options());
    w.run_until(T0 + 1_000).await;
    assert!(!first.is_finished(), "a waits for x's lease");
    assert_eq!(w.ranks().await, ["x", "a"]);
    assert_eq!(client.claimed_roles(), [ROLE]);

    let log = w.state_log();
    for member in ["b", "a"] {
        let err = client.acquire(ROLE, member, w.options()).await.unwrap_err();
        assert_refused(&err);
    }
    assert_eq!(w.state_log(), log, "no registration was appended");
    assert_eq!(w.ranks().await, ["x", "a"]);

    // Another role on the same client is not refused.
    let other = client
        .acquire("other-role", "a", w.options())
        .await
        .unwrap();
    assert_eq!(client.claimed_roles(), [ROLE, "other-role"]);

    // The first acquire gives up (its future is dropped): the claim ends
    // with it, and the role can be acquired again.
    first.abort();
    settle().await;
    assert_eq!(client.claimed_roles(), ["other-role"]);
    assert_eq!(w.ranks().await, ["x"]);
    let again = spawn_acquire(&client, "b", w.options());
    w.run_until(T0 + 2_000).await;
    assert!(!again.is_finished());
    assert_eq!(w.ranks().await, ["x", "b"], "the new acquire registered");
    assert!(other.is_held());
}

#[tokio::test(flavor = "current_thread")]
async fn a_second_acquire_of_a_held_role_is_refused_until_the_term_ends() {
    let w = World::new();
    let (client, _) = client(&w);
    let a = client.acquire(ROLE, "a", w.options()).await.unwrap();
    let log = w.state_log();
    let err = client.acquire(ROLE, "b", w.options()).await.unwrap_err();
    assert_refused(&err);
    assert_eq!(w.state_log(), log, "nothing was written for it");
    assert!(a.is_held());

    // Resigned: the role can be acquired again, and is won at once.
    a.resign().await.unwrap();
    assert!(client.claimed_roles().is_empty());
    let b = client.acquire(ROLE, "b", w.options()).await.unwrap();
    assert!(b.token() > a.token());
    assert_eq!(client.claimed_roles(), [ROLE]);

    // Fenced (another process minted): the term ended, so the claim did,
    // while the handle is still around.
    let _newer = w.transport().acquire_epoch(ROLE, LEASE).await.unwrap();
    w.run_until(T0 + ms(RENEW)).await;
    assert!(b.err().unwrap().is_fenced());
    assert!(client.claimed_roles().is_empty());
    let c = spawn_acquire(&client, "c", w.options());
    settle().await;
    assert_eq!(client.claimed_roles(), [ROLE], "c's acquire is accepted");
    c.abort();

    // Dropped without resigning: the claim ends with the handle.
    let w = World::new();
    let client = Client::from_transport(w.transport());
    let d = client.acquire(ROLE, "d", w.options()).await.unwrap();
    let deadline = d.lease().deadline;
    drop(d);
    assert!(client.claimed_roles().is_empty());
    let e = spawn_acquire(&client, "e", w.options());
    w.run_until(deadline).await;
    let e = leader(e).await;
    assert_eq!(e.member(), "e");
}

#[tokio::test(flavor = "current_thread")]
async fn a_failed_or_cancelled_acquire_ends_the_claim() {
    let w = World::new();
    let x = w.spawn("x");
    w.run_until(T0).await;
    let _x = leader(x).await;
    let (client, _) = client(&w);
    let cancel = tokio_util::sync::CancellationToken::new();
    let first = spawn_acquire(&client, "a", w.options().with_cancel(cancel.clone()));
    w.run_until(T0 + 1_000).await;
    assert_eq!(client.claimed_roles(), [ROLE]);
    cancel.cancel();
    settle().await;
    let err = first.await.unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled);
    assert!(client.claimed_roles().is_empty());
    assert_eq!(w.ranks().await, ["x"]);

    // An acquire that fails (bad options) claims nothing.
    let bad = w
        .options()
        .with_lease_duration(std::time::Duration::from_secs(5));
    let err = client.acquire(ROLE, "a", bad).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(client.claimed_roles().is_empty());
    let again = spawn_acquire(&client, "a", w.options());
    settle().await;
    assert_eq!(client.claimed_roles(), [ROLE]);
    again.abort();
}

#[tokio::test(flavor = "current_thread")]
async fn options_of_another_partition_count_are_refused_before_any_io() {
    let w = World::new();
    let (client, t) = client(&w);
    assert_eq!(client.partitions(), PARTITIONS);
    let err = client
        .acquire(ROLE, "a", w.options().with_partitions(8))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("(8)") && msg.contains("(16)"), "{msg}");
    assert_eq!(w.cluster.requests(), 0, "nothing was sent");
    assert!(client.claimed_roles().is_empty());

    // A client of 8 partitions: its own options carry the count, and its
    // members and describes use the partition of that count.
    let eight = Client::from_transport(t).with_partitions(8).unwrap();
    assert_eq!(eight.leadership_options().election.partitions, 8);
    let err = eight.acquire(ROLE, "a", w.options()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err:?}");
    let options = w.options().with_partitions(8);
    let a = eight.acquire(ROLE, "a", options).await.unwrap();
    assert_eq!(a.partition(), role_partition(ROLE, 8).unwrap());
    let state = eight.describe_role_state(ROLE).await.unwrap();
    assert_eq!(state.partition, a.partition());
    assert_eq!(state.roster.len(), 1);
    assert_eq!(state.lease.map(|l| l.token), Some(a.token()));
    let status = eight.describe_leadership(ROLE).await.unwrap();
    assert!(status.authoritative(&a.token()));

    // Bad counts, and a count set after the client was shared, are refused.
    let err = Client::from_transport(w.transport())
        .with_partitions(0)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    let shared = Client::from_transport(w.transport());
    let _clone = shared.clone();
    let err = shared.with_partitions(8).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
}

#[cfg(feature = "kafka")]
#[tokio::test(flavor = "current_thread")]
async fn topic_operations_need_a_kafka_client() {
    use krabka_coordination::transport::kafka::TopicSpec;
    let w = World::new();
    let (client, _) = client(&w);
    let err = client
        .ensure_state_topic(TopicSpec::development())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("ensure_state_topic"), "{err}");
    let err = client
        .check_state_topic(TopicSpec::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(w.cluster.requests(), 0);
}
