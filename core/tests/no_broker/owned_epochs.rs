//! A held epoch belongs to its holder, on the in-memory
//! transport: two epochs of one role minted on one transport are fenced by
//! age, and a cancelled acquire releases only what it minted itself. The
//! same on a real Kafka is in `kafka_epoch` and `kafka_client`.

use crate::world;

use std::sync::Arc;

use krabka_coordination::codec::{decode_lease, encode_key, encode_lease, Key, Lease};
use krabka_coordination::events::{self, EventKind};
use krabka_coordination::leadership::{describe_leadership, describe_role_state};
use krabka_coordination::transport::{Coordinator, LeaseWriter, StateReader, StateRecord};
use krabka_coordination::{Clock, Error, FencingToken};
use tokio_util::sync::CancellationToken;
use world::hooked::Hooked;
use world::*;

/// How long one write of an epoch may take in these tests.
const WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

/// The lease record of [`ROLE`] for `member` with `token`, granted at `at`.
fn lease_record(w: &World, member: &str, token: FencingToken, at: i64) -> StateRecord {
    let lease = Lease {
        member: member.into(),
        token,
        granted_at: at,
        deadline: at + ms(LEASE),
    };
    StateRecord {
        partition: w.partition(),
        key: encode_key(&Key::lease(ROLE)).unwrap(),
        value: Some(encode_lease(&lease).unwrap()),
    }
}

/// The leases of [`ROLE`] a read_committed reader sees, in offset order.
async fn visible_leases(w: &World) -> Vec<Lease> {
    let lease_key = encode_key(&Key::lease(ROLE)).unwrap();
    w.transport()
        .read_partition(w.partition())
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.key == lease_key)
        .filter_map(|r| r.value.map(|v| decode_lease(&v).unwrap()))
        .collect()
}

#[tokio::test(flavor = "current_thread")]
async fn two_epochs_of_one_role_on_one_transport_are_fenced_by_age() {
    let w = World::new();
    let t = w.transport();
    let older = t.acquire_epoch(ROLE, LEASE).await.unwrap();
    let newer = t.acquire_epoch(ROLE, LEASE).await.unwrap();
    assert!(newer.token() > older.token());
    assert_eq!(
        t.held(ROLE),
        [older.token(), newer.token()],
        "each mint is a handle of its own"
    );

    // The older handle is fenced on every write; the newer one writes.
    let err = older
        .write_lease(lease_record(&w, "m", older.token(), T0), WITHIN)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Fenced(_)), "{err:?}");
    let err = older
        .write_guarded(vec![order("older")], WITHIN)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Fenced(_)), "{err:?}");
    newer
        .write_lease(lease_record(&w, "m", newer.token(), T0 + 1), WITHIN)
        .await
        .unwrap();
    newer
        .write_guarded(vec![order("newer")], WITHIN)
        .await
        .unwrap();
    // Still fenced after the newer one wrote: nothing routes the older
    // handle's writes through the newer epoch.
    let err = older
        .write_lease(lease_record(&w, "m", older.token(), T0 + 2), WITHIN)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Fenced(_)), "{err:?}");

    let leases = visible_leases(&w).await;
    assert_eq!(
        leases.iter().map(|l| l.token).collect::<Vec<_>>(),
        [newer.token()],
        "only the newer epoch's lease is visible"
    );
    assert_eq!(orders(&w), ["newer"]);
    let status = describe_leadership(t.as_ref(), ROLE).await.unwrap();
    assert!(status.authoritative(&newer.token()));
    assert!(!status.authoritative(&older.token()));

    // Dropping the older handle releases it and nothing else.
    let newer_token = newer.token();
    drop(older);
    assert_eq!(t.held(ROLE), [newer_token]);
    newer
        .write_lease(lease_record(&w, "m", newer_token, T0 + 3), WITHIN)
        .await
        .unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn a_holder_whose_transport_mints_a_newer_epoch_is_fenced_not_renewed() {
    // A second epoch of the role on the holder's own transport. The holder's
    // renewals and guarded writes go through its own epoch, so they are
    // fenced.
    let w = World::new();
    let t = w.transport();
    let a = leader_on(&w, &t, "a").await;
    let newer = t.acquire_epoch(ROLE, LEASE).await.unwrap();
    w.run_until(T0 + ms(RENEW)).await;
    assert!(!a.is_held(), "the renewal met the fence");
    assert!(a.err().unwrap().is_fenced());
    let err = a.write(vec![order("a")]).await.unwrap_err();
    assert!(matches!(err, Error::Fenced(_)), "{err:?}");
    newer
        .write_guarded(vec![order("newer")], WITHIN)
        .await
        .unwrap();
    assert_eq!(orders(&w), ["newer"]);
    let leases = visible_leases(&w).await;
    assert!(
        leases
            .iter()
            .all(|l| l.token == a.token() && l.granted_at == T0),
        "no renewal of a committed after the newer mint: {leases:?}"
    );
    // a's epoch goes with a, the newer one stays.
    assert_eq!(t.held(ROLE), [a.token(), newer.token()]);
    let newer_token = newer.token();
    drop(a);
    settle().await;
    assert_eq!(t.held(ROLE), [newer_token]);
}

/// `member` acquires [`ROLE`] on `t` and wins at once (nobody else holds it).
async fn leader_on(
    w: &World,
    t: &Arc<krabka_coordination::transport::memory::MemoryTransport>,
    member: &str,
) -> krabka_coordination::leadership::Leadership {
    let h = spawn_on(t.clone(), member, w.options());
    settle().await;
    leader(h).await
}

#[tokio::test(flavor = "current_thread")]
async fn a_cancelled_candidate_leaves_the_holders_epoch_on_a_shared_transport_alone() {
    let w = World::new();
    let t = w.transport();
    let a = leader_on(&w, &t, "a").await;
    let cancel = CancellationToken::new();
    let b = spawn_on(t.clone(), "b", w.options().with_cancel(cancel.clone()));
    w.run_until(T0 + 1_000).await;
    assert_eq!(w.ranks().await, ["a", "b"], "b waits");
    cancel.cancel();
    settle().await;
    assert!(matches!(b.await.unwrap(), Err(Error::Cancelled)));
    assert_eq!(w.ranks().await, ["a"], "b deregistered");
    assert_eq!(t.held(ROLE), [a.token()], "a's epoch is still live");

    // a keeps renewing and writing through its epoch.
    w.run_until(T0 + 3 * ms(RENEW)).await;
    assert!(a.is_held());
    assert_eq!(a.lease().granted_at, T0 + 3 * ms(RENEW), "renewed");
    a.write(vec![order("a-after")]).await.unwrap();
    assert_eq!(orders(&w), ["a-after"]);
    let status = describe_leadership(t.as_ref(), ROLE).await.unwrap();
    assert!(status.authoritative(&a.token()));
}

#[tokio::test(flavor = "current_thread")]
async fn a_candidate_that_lost_its_challenge_and_is_cancelled_holds_nothing() {
    // b mints, a rival mints in between, b's first lease is fenced; then b is
    // cancelled while it waits again. The epoch b minted went with the lost
    // challenge, the rival's is untouched.
    let w = World::new();
    let hooked = Arc::new(Hooked::new(w.cluster.transport()));
    let rival = w.transport();
    let rival_epoch = Arc::new(std::sync::Mutex::new(None));
    {
        let (rival, slot) = (rival.clone(), Arc::clone(&rival_epoch));
        hooked.after_next_mint(move || {
            *slot.lock().unwrap() = Some(rival.mint(ROLE).unwrap());
        });
    }
    let cancel = CancellationToken::new();
    let (tx, mut rx) = events::channel();
    let b = spawn_on(
        hooked.clone(),
        "b",
        w.options().with_cancel(cancel.clone()).with_events(tx),
    );
    settle().await;
    let lost = drain(&mut rx);
    assert_eq!(
        names(&lost),
        ["registered", "challenging", "lost_challenge", "waiting"]
    );
    assert!(!b.is_finished());
    assert!(
        hooked.inner().held(ROLE).is_empty(),
        "the lost epoch is gone"
    );
    cancel.cancel();
    settle().await;
    assert!(matches!(b.await.unwrap(), Err(Error::Cancelled)));
    assert!(hooked.inner().held(ROLE).is_empty());
    let rival_token = rival_epoch.lock().unwrap().as_ref().unwrap().token();
    assert_eq!(rival.held(ROLE), [rival_token], "the rival's epoch is live");
    assert!(w.ranks().await.is_empty(), "b deregistered");
}

#[tokio::test(flavor = "current_thread")]
async fn a_cancel_that_fires_as_the_role_is_won_resigns_it() {
    let w = World::new();
    let hooked = Arc::new(Hooked::new(w.cluster.transport()));
    let cancel = CancellationToken::new();
    {
        // The caller gives up in the instant the first lease commits.
        let cancel = cancel.clone();
        hooked.after_next_lease(move || cancel.cancel());
    }
    let (tx, mut rx) = events::channel();
    let a = spawn_on(
        hooked.clone(),
        "a",
        w.options().with_cancel(cancel.clone()).with_events(tx),
    );
    settle().await;
    assert!(matches!(a.await.unwrap(), Err(Error::Cancelled)));

    let events = drain(&mut rx);
    assert_eq!(
        names(&events),
        [
            "registered",
            "challenging",
            "elected",
            "resigned",
            "deregistered"
        ]
    );
    let won = match events[2].kind {
        EventKind::Elected { token, .. } => token,
        ref other => panic!("{other:?}"),
    };
    assert!(matches!(
        events[3].kind,
        EventKind::Resigned { cleared: true }
    ));
    // The role is handed over: a newer epoch superseded the won one, the
    // lease is tombstoned, the member is gone, and no epoch is left.
    let status = describe_leadership(hooked.as_ref(), ROLE).await.unwrap();
    assert!(status.token > won, "{won} -> {}", status.token);
    let state = describe_role_state(hooked.as_ref(), ROLE, PARTITIONS)
        .await
        .unwrap();
    assert_eq!(state.lease, None, "the lease is cleared");
    assert!(state.roster.is_empty(), "a deregistered");
    assert!(hooked.inner().held(ROLE).is_empty(), "both epochs released");

    // A standby takes over at once, without the clock moving.
    let b = w.spawn("b");
    settle().await;
    let b = leader(b).await;
    assert!(b.token() > status.token);
    assert_eq!(w.clock.now_millis(), T0);
}
