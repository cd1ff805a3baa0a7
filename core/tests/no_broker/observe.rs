//! The observer's rules on the in-memory transport and a
//! manual clock: which views an observer reports, in which order, and when
//! it may say that a lease lapsed. The same observer on Kafka is tested in
//! `kafka_observe.rs`.

use crate::world;

use std::sync::Arc;
use std::time::Duration;

use krabka_coordination::client::Client;
use krabka_coordination::codec::{encode_key, encode_lease, Key, Lease};
use krabka_coordination::observe::{Change, ObserveOptions, Observer, RoleView};
use krabka_coordination::transport::memory::MemoryEpoch;
use krabka_coordination::transport::{LeaseWriter, StateRecord};
use krabka_coordination::{role_partition, ErrorKind};
use world::*;

fn observe_options(w: &World) -> ObserveOptions {
    ObserveOptions::default()
        .with_clock(Arc::new(w.clock.clone()))
        .with_poll_wait(Duration::from_secs(1))
}

async fn observer(w: &World, roles: &[&str], options: ObserveOptions) -> Observer {
    Client::from_transport(w.transport())
        .with_partitions(PARTITIONS)
        .unwrap()
        .observe(roles, options)
        .await
        .unwrap()
}

/// Every view reported so far.
fn views(o: &mut Observer) -> Vec<RoleView> {
    let mut out = Vec::new();
    while let Some(v) = o.try_next().unwrap() {
        out.push(v);
    }
    out
}

fn changes(views: &[RoleView]) -> Vec<(Change, Option<String>)> {
    views
        .iter()
        .map(|v| (v.change, v.leader.as_ref().map(|l| l.member.clone())))
        .collect()
}

fn roster(v: &RoleView) -> Vec<&str> {
    v.roster.iter().map(|e| e.member.as_str()).collect()
}

#[tokio::test(flavor = "current_thread")]
async fn an_observer_sees_a_handover_and_a_lapse_in_order() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = leader(a).await;
    let mut o = observer(&w, &[ROLE], observe_options(&w)).await;
    w.run_until(T0 + 500).await;
    let first = views(&mut o);
    assert_eq!(changes(&first), [(Change::Initial, Some("a".into()))]);
    assert_eq!(first[0].leader.as_ref().unwrap().token, a.token());
    assert_eq!(roster(&first[0]), ["a"]);
    assert_eq!(first[0].partition, w.partition());

    let b = w.spawn("b");
    w.run_until(T0 + 1_000).await;
    let joined = views(&mut o);
    assert_eq!(changes(&joined), [(Change::Roster, Some("a".into()))]);
    assert_eq!(roster(&joined[0]), ["a", "b"]);

    // Renewals are not views by default.
    w.run_until(T0 + 2 * ms(RENEW) + 500).await;
    assert!(views(&mut o).is_empty(), "renewals are not reported");

    let a_token = a.token();
    a.resign().await.unwrap();
    w.run_until(T0 + 2 * ms(RENEW) + 1_500).await;
    let b = leader(b).await;
    let handover = views(&mut o);
    assert_eq!(
        changes(&handover),
        [
            (Change::Cleared, None),
            (Change::Roster, None),
            (Change::Elected, Some("b".into())),
        ],
        "the tombstone, a's deregistration, b's first lease: {handover:#?}"
    );
    assert_eq!(roster(&handover[1]), ["b"]);
    let elected = handover[2].leader.as_ref().unwrap();
    assert_eq!(elected.token, b.token());
    assert!(elected.token > a_token);

    // b freezes: its lease lapses at its deadline, not before.
    let deadline = elected.deadline;
    drop(b);
    w.run_until(deadline - 1).await;
    assert!(views(&mut o).is_empty(), "nothing before the deadline");
    w.run_until(deadline + 1_000).await;
    let lapsed = views(&mut o);
    assert_eq!(changes(&lapsed), [(Change::Lapsed, None)]);
    assert_eq!(lapsed[0].lapsed.as_ref().unwrap().member, "b");
    assert!(lapsed[0].at >= deadline);
    assert_eq!(roster(&lapsed[0]), ["b"], "b is still registered");
}

#[tokio::test(flavor = "current_thread")]
async fn renewals_are_views_when_asked_for() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = leader(a).await;
    let mut o = observer(&w, &[ROLE], observe_options(&w).with_renewals(true)).await;
    w.run_until(T0 + 2 * ms(RENEW) + 500).await;
    let seen = views(&mut o);
    assert_eq!(
        changes(&seen),
        [
            (Change::Initial, Some("a".into())),
            (Change::Renewed, Some("a".into())),
            (Change::Renewed, Some("a".into())),
        ]
    );
    assert!(seen[2].leader.as_ref().unwrap().deadline > seen[1].leader.as_ref().unwrap().deadline);
    drop(a);
}

/// A hand-made holder of [`ROLE`]: its epoch writes the lease records.
struct Holder {
    epoch: MemoryEpoch,
}

impl Holder {
    fn lease(&self, w: &World, deadline: i64) -> StateRecord {
        self.lease_granted(w, deadline - ms(LEASE), deadline)
    }

    fn lease_granted(&self, w: &World, granted_at: i64, deadline: i64) -> StateRecord {
        StateRecord {
            partition: w.partition(),
            key: encode_key(&Key::lease(ROLE)).unwrap(),
            value: Some(
                encode_lease(&Lease {
                    member: "h".into(),
                    token: self.epoch.token(),
                    granted_at,
                    deadline,
                })
                .unwrap(),
            ),
        }
    }
}

#[tokio::test(flavor = "current_thread")]
async fn no_lapse_while_a_record_of_the_role_is_in_an_open_transaction() {
    let w = World::new();
    let h = Holder {
        epoch: w.transport().mint(ROLE).unwrap(),
    };
    let first_deadline = T0 + ms(LEASE);
    h.epoch
        .write_lease(h.lease(&w, first_deadline), LEASE)
        .await
        .unwrap();
    let mut o = observer(&w, &[ROLE], observe_options(&w)).await;
    w.run_until(T0 + 1_000).await;
    assert_eq!(
        changes(&views(&mut o)),
        [(Change::Initial, Some("h".into()))]
    );
    // The renewal's transaction stays open past the old deadline: the
    // observer cannot tell a late renewal from a dead holder, so it waits.
    h.epoch
        .write_lease_open(h.lease(&w, first_deadline + ms(LEASE)))
        .unwrap();
    w.run_until(first_deadline + 5_000).await;
    assert!(
        views(&mut o).is_empty(),
        "a renewal in an open transaction may commit: no lapse yet"
    );
    // It commits (the epoch's next write decides it): the same leader, its
    // deadline moved, and still no view.
    h.epoch
        .write_lease(h.lease(&w, first_deadline + ms(LEASE) + 1), LEASE)
        .await
        .unwrap();
    w.run_until(first_deadline + 6_000).await;
    assert!(views(&mut o).is_empty(), "a renewal is not a view");
    w.run_until(first_deadline + ms(LEASE) + 2_000).await;
    assert_eq!(changes(&views(&mut o)), [(Change::Lapsed, None)]);
}

#[tokio::test(flavor = "current_thread")]
async fn another_roles_open_transaction_does_not_hold_a_lapse_back() {
    let w = World::new();
    let h = Holder {
        epoch: w.transport().mint(ROLE).unwrap(),
    };
    let deadline = T0 + ms(LEASE);
    h.epoch
        .write_lease(h.lease(&w, deadline), LEASE)
        .await
        .unwrap();
    let mut o = observer(&w, &[ROLE], observe_options(&w)).await;
    w.run_until(T0 + 1_000).await;
    assert_eq!(views(&mut o).len(), 1);
    // A neighbour role of the same partition stalls mid-transaction.
    let neighbour = (0..)
        .map(|i| format!("neighbour-{i}"))
        .find(|r| role_partition(r, PARTITIONS).unwrap() == w.partition())
        .unwrap();
    let stalled = w.transport().mint(&neighbour).unwrap();
    stalled
        .write_lease_open(StateRecord {
            partition: w.partition(),
            key: encode_key(&Key::lease(neighbour.as_str())).unwrap(),
            value: Some(b"stalled".to_vec()),
        })
        .unwrap();
    w.run_until(deadline + 1_000).await;
    assert_eq!(
        changes(&views(&mut o)),
        [(Change::Lapsed, None)],
        "read past the neighbour's transaction: nothing of this role is open"
    );
    drop(stalled);
}

#[tokio::test(flavor = "current_thread")]
async fn several_roles_in_one_observer() {
    let w = World::new();
    let other = "payroll-export";
    let a = w.spawn("a");
    let t = w.transport();
    let o2 = w.options();
    let p = tokio::spawn(async move {
        krabka_coordination::leadership::acquire_leadership(t, other, "p", o2).await
    });
    w.run_until(T0).await;
    let a = leader(a).await;
    let p = p.await.unwrap().unwrap();
    let mut o = observer(&w, &[other, ROLE, other], observe_options(&w)).await;
    assert_eq!(o.roles(), [ROLE, other], "sorted, each once");
    w.run_until(T0 + 500).await;
    let mut seen: Vec<(String, Option<String>)> = views(&mut o)
        .iter()
        .map(|v| {
            (
                v.role.to_string(),
                v.leader.as_ref().map(|l| l.member.clone()),
            )
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            (ROLE.to_string(), Some("a".to_string())),
            (other.to_string(), Some("p".to_string()))
        ]
    );
    o.close();
    assert!(o.next().await.unwrap().is_none(), "closed");
    drop((a, p));
}

#[tokio::test(flavor = "current_thread")]
async fn bad_arguments_are_refused_before_any_read() {
    let w = World::new();
    let client = Client::from_transport(w.transport());
    let before = w.cluster.requests();
    for (roles, what) in [
        (&[][..], "at least one role"),
        (&[""][..], "role"),
        (&["ok", "a\0b"][..], "NUL"),
    ] {
        let e = client
            .observe(roles, observe_options(&w))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert!(e.to_string().contains(what), "{e} names {what}");
    }
    let e = client
        .observe(&[ROLE], observe_options(&w).with_poll_wait(Duration::ZERO))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("poll wait"), "{e}");
    assert_eq!(w.cluster.requests(), before, "nothing was read");
}

#[tokio::test(flavor = "current_thread")]
async fn a_record_of_the_role_that_does_not_decode_ends_the_observer() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = leader(a).await;
    let mut o = observer(&w, &[ROLE], observe_options(&w)).await;
    w.run_until(T0 + 500).await;
    assert_eq!(views(&mut o).len(), 1);
    use krabka_coordination::transport::Registrar;
    w.transport()
        .append(StateRecord {
            partition: w.partition(),
            key: encode_key(&Key::registration(ROLE, "x")).unwrap(),
            value: Some(b"not a registration".to_vec()),
        })
        .await
        .unwrap();
    w.run_until(T0 + 1_500).await;
    let e = o.next().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Format, "{e}");
    assert!(
        o.next().await.unwrap().is_none(),
        "an error ends the observer"
    );
    drop(a);
}

#[tokio::test(flavor = "current_thread")]
async fn a_holder_clock_hours_ahead_lapses_one_lease_after_it_was_read() {
    let w = World::new();
    let h = Holder {
        epoch: w.transport().mint(ROLE).unwrap(),
    };
    // The holder's clock is two hours ahead: its deadline too.
    let ahead = 2 * 3_600_000;
    h.epoch
        .write_lease(
            h.lease_granted(&w, T0 + ahead, T0 + ahead + ms(LEASE)),
            LEASE,
        )
        .await
        .unwrap();
    let mut o = observer(&w, &[ROLE], observe_options(&w)).await;
    w.run_until(T0 + 1_000).await;
    assert_eq!(
        changes(&views(&mut o)),
        [(Change::Initial, Some("h".into()))]
    );
    w.run_until(T0 + ms(LEASE) - 1_000).await;
    assert!(views(&mut o).is_empty(), "trusted for one lease");
    w.run_until(T0 + ms(LEASE) + 1_000).await;
    assert_eq!(
        changes(&views(&mut o)),
        [(Change::Lapsed, None)],
        "one lease (the record's own duration) after it was first read"
    );
}
