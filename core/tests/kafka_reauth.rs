//! SASL session lifetimes (KIP-368) on a real broker: the
//! secured cluster's second SASL_SSL listener (`ci/kafka.sh settings
//! secured reauth`) sets `connections.max.reauth.ms` to a couple of
//! seconds, so the broker ends every SASL session that soon and closes a
//! connection that did not re-authenticate. The protocol client replaces
//! its connection before the end; librdkafka re-authenticates. Neither may
//! fail a request over it.
#![cfg(feature = "kafka")]

mod support;

use std::time::{Duration, Instant};

use krabka_coordination::client::Client;
use krabka_coordination::transport::kafka::{KafkaClient, KafkaConfig, TopicSpec};
use krabka_coordination::NO_EPOCH;
use support::*;

/// The super user over SCRAM-SHA-512 on the listener with short sessions.
fn reauth_config() -> KafkaConfig {
    let cluster = secured();
    cluster
        .config("SCRAM-SHA-512", "admin")
        .set("bootstrap.servers", secured_reauth_bootstrap())
}

/// Describes `role` every 100 ms for `period` with `client`; every answer
/// must come. Returns how many describes were made.
async fn describe_for(client: &KafkaClient, role: &str, period: Duration) -> u32 {
    let until = Instant::now() + period;
    let mut n = 0;
    while Instant::now() < until {
        let token = client
            .describe_epoch(role)
            .await
            .unwrap_or_else(|e| panic!("describe {n} after {:?}: {e}", until.elapsed()));
        assert_eq!(token, NO_EPOCH);
        n += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_protocol_client_keeps_working_across_several_session_lifetimes() {
    init_tracing();
    let client = KafkaClient::new(&reauth_config()).expect("client");
    let role = unique("reauth-nobody");
    assert_eq!(
        client.describe_epoch(&role).await.expect("describe"),
        NO_EPOCH
    );
    let lifetime = client
        .sasl_session_lifetime()
        .expect("the broker set a SASL session lifetime on this listener");
    assert!(
        lifetime <= Duration::from_secs(5),
        "a session of {lifetime:?} is too long for this test"
    );
    eprintln!("SASL session lifetime: {lifetime:?}");
    let connects = client.connections_made();
    // Four lifetimes of describes, one every 100 ms: each connection is
    // retired at 85 % of its session, before the broker ends it.
    let n = describe_for(&client, &role, lifetime * 4).await;
    let made = client.connections_made() - connects;
    eprintln!(
        "{n} describes over {:?} on {made} new connections",
        lifetime * 4
    );
    assert!(
        made >= 3,
        "{n} describes over four session lifetimes made only {made} new connections"
    );

    // The other listener sets no lifetime: one connection throughout.
    let plain = KafkaClient::new(&secured().config("SCRAM-SHA-512", "admin")).unwrap();
    describe_for(&plain, &role, lifetime * 2).await;
    assert_eq!(plain.sasl_session_lifetime(), None);
    assert_eq!(plain.connections_made(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn librdkafka_clients_keep_working_across_several_session_lifetimes() {
    init_tracing();
    let config = reauth_config().with_state_topic(unique("krabka-test-reauth-state"));
    let client = Client::new(config.clone()).expect("client");
    client
        .ensure_state_topic(TopicSpec::development())
        .await
        .expect("the state topic");
    let data = config
        .clone()
        .with_state_topic(unique("krabka-test-reauth-data"));
    krabka_coordination::transport::kafka::ensure_state_topic(&data, 1, 1, 1)
        .await
        .expect("the data topic");
    let role = unique("reauth-role");
    let options = client
        .leadership_options()
        .with_lease_duration(Duration::from_secs(10))
        .with_renew_interval(Duration::from_millis(500));
    let leader = client.acquire(&role, "a", options).await.expect("acquire");
    let token = leader.token();
    // Seven seconds, over three session lifetimes: the lease producer
    // renews every 500 ms, writes and reads go on.
    let until = Instant::now() + Duration::from_secs(7);
    let mut n = 0;
    while Instant::now() < until {
        leader
            .write(vec![data_record(
                data.state_topic(),
                0,
                format!("reauth-{n}").as_bytes(),
            )])
            .await
            .unwrap_or_else(|e| panic!("guarded write {n}: {e}"));
        let status = client.describe_leadership(&role).await.expect("describe");
        assert!(status.authoritative(&token), "{status:?}");
        let state = client
            .describe_role_state(&role)
            .await
            .expect("the role's state");
        assert_eq!(
            state.lease.as_ref().map(|l| l.token),
            Some(token),
            "{state:?}"
        );
        n += 1;
        tokio::time::sleep(Duration::from_millis(600)).await;
    }
    assert!(n >= 5, "only {n} rounds");
    assert!(leader.is_held(), "the leadership ended while held");
    assert_eq!(leader.token(), token);
    leader.resign().await.expect("resign");
    let status = client.describe_leadership(&role).await.expect("describe");
    assert!(!status.authoritative(&token), "{status:?}");
}
