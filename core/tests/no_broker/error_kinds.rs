//! Stable error kinds of real errors the core produces,
//! not of hand-built ones: a binding maps `Error::kind()`, never the text.
//! A fatal error needs a real Kafka (`kafka_config` checks its kind).

use crate::world;

use std::time::Duration;

use krabka_coordination::client::Client;
use krabka_coordination::codec::{encode_key, Key};
use krabka_coordination::leadership::{
    acquire_leadership, describe_leadership, describe_role_state,
};
use krabka_coordination::transport::{Coordinator, Registrar, StateRecord, Transport};
use krabka_coordination::{
    decode_lease, encode_registration, Error, ErrorKind, Part, Registration,
};
use tokio_util::sync::CancellationToken;
use world::*;

/// Asserts `err` has `kind`, and that the kind survives the trip through
/// its value and its name, as a binding's table sees it.
fn assert_kind(err: &Error, kind: ErrorKind) {
    assert_eq!(err.kind(), kind, "{err:?}");
    assert_eq!(ErrorKind::from_u32(err.kind() as u32), Some(kind));
    assert_eq!(ErrorKind::from_name(err.kind().name()), Some(kind));
}

#[tokio::test(flavor = "current_thread")]
async fn malformed_records_are_format_errors() {
    let err: Error = decode_lease(b"\x00\x01garbage").unwrap_err().into();
    assert_kind(&err, ErrorKind::Format);

    // A lease value of the role that does not decode, met by the core.
    let w = World::new();
    w.transport()
        .append(StateRecord {
            partition: w.partition(),
            key: encode_key(&Key::lease(ROLE)).unwrap(),
            value: Some(b"not a lease".to_vec()),
        })
        .await
        .unwrap();
    let err = describe_role_state(w.transport().as_ref(), ROLE, PARTITIONS)
        .await
        .unwrap_err();
    assert_kind(&err, ErrorKind::Format);
    assert!(
        matches!(&err, Error::Format(f) if f.part == Part::LeaseValue),
        "{err:?}"
    );
    let t: std::sync::Arc<dyn Transport> = w.transport();
    let err = acquire_leadership(t, ROLE, "a", w.options())
        .await
        .unwrap_err();
    assert_kind(&err, ErrorKind::Format);
}

#[tokio::test(flavor = "current_thread")]
async fn values_the_layout_cannot_hold_are_encode_errors_and_invalid_arguments_to_a_member() {
    let long = "m".repeat(40_000);
    let err: Error = encode_registration(&Registration {
        member: long.clone(),
        registered_at: 0,
    })
    .unwrap_err()
    .into();
    assert_kind(&err, ErrorKind::Encode);
    let w = World::new();
    // A member refuses it before anything is sent, as an argument (the
    // message quotes the id only in part).
    let err = acquire_leadership(w.transport(), ROLE, &long, w.options())
        .await
        .unwrap_err();
    assert_kind(&err, ErrorKind::InvalidArgument);
    assert!(err.to_string().len() < 300, "{err}");
    assert_eq!(w.cluster.requests(), 0);
}

#[tokio::test(flavor = "current_thread")]
async fn bad_options_and_arguments_are_invalid_argument() {
    let w = World::new();
    let bad = w
        .options()
        .with_lease_duration(Duration::from_secs(5))
        .with_renew_interval(Duration::from_secs(10));
    let err = acquire_leadership(w.transport(), ROLE, "a", bad)
        .await
        .unwrap_err();
    assert_kind(&err, ErrorKind::InvalidArgument);
    let err = acquire_leadership(w.transport(), "", "a", w.options())
        .await
        .unwrap_err();
    assert_kind(&err, ErrorKind::InvalidArgument);
    let err = describe_leadership(w.transport().as_ref(), "")
        .await
        .unwrap_err();
    assert_kind(&err, ErrorKind::InvalidArgument);
    let client = Client::from_transport(w.transport());
    let err = client
        .acquire(ROLE, "a", w.options().with_partitions(4))
        .await
        .unwrap_err();
    assert_kind(&err, ErrorKind::InvalidArgument);
    w.cluster.set_min_lease_duration(Duration::from_secs(60));
    let err = acquire_leadership(w.transport(), ROLE, "a", w.options())
        .await
        .unwrap_err();
    assert_kind(&err, ErrorKind::InvalidArgument);
}

#[tokio::test(flavor = "current_thread")]
async fn a_fenced_write_is_fenced_and_a_write_after_resign_is_resigned() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = leader(a).await;
    let _newer = w.transport().acquire_epoch(ROLE, LEASE).await.unwrap();
    let err = a.write(vec![order("x")]).await.unwrap_err();
    assert_kind(&err, ErrorKind::Fenced);
    assert_kind(&a.err().unwrap(), ErrorKind::Fenced);
    let err = a.write(vec![order("y")]).await.unwrap_err();
    assert_kind(&err, ErrorKind::Fenced);

    let w = World::new();
    let b = w.spawn("b");
    w.run_until(T0).await;
    let b = leader(b).await;
    b.resign().await.unwrap();
    let err = b.write(vec![order("z")]).await.unwrap_err();
    assert_kind(&err, ErrorKind::Resigned);
    assert_kind(&b.err().unwrap(), ErrorKind::Resigned);
    assert!(orders(&w).is_empty());
}

#[tokio::test(flavor = "current_thread")]
async fn a_cancelled_acquire_is_cancelled() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let _a = leader(a).await;
    let cancel = CancellationToken::new();
    let b = w.spawn_with("b", w.options().with_cancel(cancel.clone()));
    w.run_until(T0 + 1_000).await;
    cancel.cancel();
    settle().await;
    assert_kind(&b.await.unwrap().unwrap_err(), ErrorKind::Cancelled);
}

#[tokio::test(flavor = "current_thread")]
async fn an_outage_is_transient_with_its_cause_kept() {
    let w = World::new();
    w.cluster.set_unavailable(true);
    let err = describe_leadership(w.transport().as_ref(), ROLE)
        .await
        .unwrap_err();
    assert_kind(&err, ErrorKind::Transient);
    let cause = std::error::Error::source(&err).expect("the cause is kept");
    assert!(cause.to_string().contains("unavailable"), "{cause}");
}
