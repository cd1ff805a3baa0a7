//! A guarded write cut off with the role's transaction coordinator does not
//! end the term.
//!
//! librdkafka sends EndTxn(abort) whenever a partition registration of the
//! transaction may have reached the coordinator, one lost with a broken
//! connection included; a coordinator that never got it answers
//! INVALID_TXN_STATE, and librdkafka makes that fatal
//! (<https://github.com/confluentinc/librdkafka/issues/4849>). On the
//! three-broker cluster that could end a healthy leader's term when the
//! coordinator's broker was killed during its guarded writes. Here the loss is
//! made certain: the coordinator's broker is paused (SIGSTOP), so the
//! registration of the next write sits unread in its socket, the write gives
//! up, and the broker is killed. The epoch must abort that transaction only
//! once the new coordinator can have it, and write on with its token.
//!
//! Needs the real three-node cluster: `KRABKA_BOOTSTRAP_3`, or
//! `ci/kafka.sh start 3` is run. The node is restarted at the end, and by a
//! guard if the test fails.
#![cfg(feature = "kafka")]

mod support;

use std::time::Duration;

use krabka_coordination::transport::kafka::{ensure_state_topic, KafkaClient, KafkaTransport};
use krabka_coordination::transport::{LeaseWriter, StateReader};
use krabka_coordination::ErrorKind;
use support::*;

/// Long enough that no transaction times out while the coordinator moves.
const LEASE: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_lost_with_the_coordinator_does_not_end_the_term() {
    init_tracing();
    let boot = bootstrap3();
    let cfg = config(&boot).with_operation_timeout(Duration::from_secs(60));
    ensure_shared_topic(&cfg, 3, 2).await;
    let data = unique("coordinator-loss-data");
    let data_cfg = cfg.clone().with_state_topic(&data);
    ensure_state_topic(&data_cfg, 1, 3, 2).await.unwrap();
    let role = unique("coordinator-loss");
    let t = KafkaTransport::new(cfg.clone(), Some("coordinator-loss")).unwrap();
    let epoch = t.mint_epoch(&role, LEASE).await.unwrap();
    let token = epoch.token();
    epoch
        .write_guarded(vec![data_record(&data, 0, b"before")], LEASE)
        .await
        .expect("a write before the fault");

    let describe = KafkaClient::new(&cfg).unwrap();
    let coordinator = node_of(&describe.coordinator_address(&role).await.unwrap(), &boot);
    let down = DownNode::pause(&coordinator);
    let e = epoch
        .write_guarded(vec![data_record(&data, 0, b"lost")], Duration::from_secs(2))
        .await
        .expect_err("no coordinator answers");
    assert_eq!(e.kind(), ErrorKind::Transient, "{e}");
    down.kill_now();

    // The coordinator moves (about broker.session.timeout.ms); the next
    // write first aborts the one that gave up, then commits.
    epoch
        .write_lease(
            lease_record(&role, Some(lease_value("m", token, 1))),
            Duration::from_secs(50),
        )
        .await
        .expect("the epoch writes on after its coordinator's broker died");
    assert!(
        epoch.has_producer().await,
        "the producer is still the epoch's"
    );
    epoch
        .write_guarded(vec![data_record(&data, 0, b"after")], LEASE)
        .await
        .expect("guarded writes go on");
    assert_eq!(
        describe.describe_epoch(&role).await.unwrap(),
        token,
        "the token is unchanged"
    );
    down.restart().await;

    let reader = KafkaTransport::new(data_cfg, Some("coordinator-loss-reader")).unwrap();
    let written = reader.read_partition(0).await.unwrap();
    assert!(has_value(&written, b"before"), "the first write is visible");
    assert!(has_value(&written, b"after"), "the last write is visible");
    assert!(
        !has_value(&written, b"lost"),
        "nothing of the write that gave up is visible"
    );
}
