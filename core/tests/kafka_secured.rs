//! The project on a secured cluster: the protocol client
//! (DescribeTransactions, FindCoordinator, the conditional epoch bump) over
//! TLS with SASL PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, a leadership round
//! through a `Client` whose librdkafka clients get the same settings, and
//! the failures that must be prompt and fatal: a wrong password, an
//! untrusted CA, a certificate that does not name the host.
//!
//! Needs the secured cluster: `ci/kafka.sh start secured` is run (it reuses
//! a running one). The super user `admin` is used throughout; the ACLs of
//! ordinary members are not tested here yet.
#![cfg(feature = "kafka")]

mod support;

use std::time::{Duration, Instant};

use krabka_coordination::client::Client;
use krabka_coordination::events;
use krabka_coordination::transport::kafka::{KafkaClient, KafkaConfig, TopicSpec};
use krabka_coordination::{Error, ErrorKind, NO_EPOCH};
use support::*;

/// How long a fatal error may take to show: one connect, a TLS handshake
/// and a SASL exchange on loopback, far below the connect timeout.
const PROMPT: Duration = Duration::from_secs(5);

const MECHANISMS: [&str; 3] = ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"];

/// Describes a role no one took and checks the coordinator's address, with
/// `config`; returns the error if any.
async fn describe_unknown(config: &KafkaConfig) -> Result<(), Error> {
    let client = KafkaClient::new(config)?;
    let role = unique("secured-nobody");
    assert_eq!(client.describe_epoch(&role).await?, NO_EPOCH);
    let coordinator = client.coordinator_address(&role).await?;
    assert!(coordinator.starts_with("localhost:"), "{coordinator}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_over_sasl_ssl_with_each_mechanism() {
    init_tracing();
    let cluster = secured();
    for mechanism in MECHANISMS {
        describe_unknown(&cluster.config(mechanism, "admin"))
            .await
            .unwrap_or_else(|e| panic!("{mechanism}: {e}"));
    }
}

/// Waits for `call` and checks it failed with a fatal error promptly.
async fn prompt_fatal(
    what: &str,
    call: impl std::future::Future<Output = Result<(), Error>>,
) -> String {
    let started = Instant::now();
    let e = tokio::time::timeout(Duration::from_secs(30), call)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within 30 s"))
        .expect_err(what);
    let took = started.elapsed();
    eprintln!("{what}: after {took:?}: {e}");
    assert_eq!(e.kind(), ErrorKind::Fatal, "{what}: {e}");
    assert!(
        took < PROMPT,
        "{what}: the error took {took:?} (retried?): {e}"
    );
    e.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_a_prompt_fatal_error_naming_mechanism_and_user() {
    init_tracing();
    let cluster = secured();
    for mechanism in MECHANISMS {
        let config = cluster
            .config(mechanism, "admin")
            .set("sasl.password", "not-the-password");
        let msg = prompt_fatal(mechanism, describe_unknown(&config)).await;
        assert!(msg.contains(mechanism), "{msg}");
        assert!(msg.contains("\"admin\""), "{msg}");
        assert!(
            !msg.contains("not-the-password"),
            "the password shows: {msg}"
        );
        // A user the broker does not know fails the same way.
        let config = cluster
            .config(mechanism, "admin")
            .set("sasl.username", "nobody");
        let msg = prompt_fatal(mechanism, describe_unknown(&config)).await;
        assert!(msg.contains("\"nobody\""), "{msg}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_certificate_is_a_prompt_fatal_error() {
    init_tracing();
    let cluster = secured();
    let config = cluster
        .config("SCRAM-SHA-512", "admin")
        .set("ssl.ca.location", &cluster.other_ca);
    let msg = prompt_fatal("untrusted CA", describe_unknown(&config)).await;
    assert!(
        msg.contains("not trusted") && msg.contains(&cluster.other_ca),
        "{msg}"
    );
    // Turning hostname verification off does not turn the chain check off.
    let config = config.set("ssl.endpoint.identification.algorithm", "none");
    let msg = prompt_fatal("untrusted CA, no hostname check", describe_unknown(&config)).await;
    assert!(msg.contains("not trusted"), "{msg}");
    // Neither does a plaintext client get anywhere (no fatal error there:
    // the broker just never answers in TLS, so the connect timeout ends it).
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostname_verification_is_on_by_default() {
    init_tracing();
    let cluster = secured();
    // The certificate names localhost only, not 127.0.0.1.
    let by_ip = format!("127.0.0.1:{}", cluster.port);
    let config = cluster
        .config("SCRAM-SHA-512", "admin")
        .set("bootstrap.servers", &by_ip);
    let msg = prompt_fatal("connect by IP", describe_unknown(&config)).await;
    assert!(
        msg.contains("does not name the host")
            && msg.contains("ssl.endpoint.identification.algorithm=none"),
        "{msg}"
    );
    let explicit = config
        .clone()
        .set("ssl.endpoint.identification.algorithm", "https");
    prompt_fatal("connect by IP, https", describe_unknown(&explicit)).await;
    // Off, as librdkafka's `none`: the chain is still checked (above), the name is not.
    let off = config.set("ssl.endpoint.identification.algorithm", "none");
    describe_unknown(&off)
        .await
        .expect("hostname verification off");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_with_an_encrypted_key_is_presented() {
    init_tracing();
    let cluster = secured();
    let config = cluster
        .config("SCRAM-SHA-256", "admin")
        .set("ssl.certificate.location", &cluster.client_cert)
        .set("ssl.key.location", &cluster.client_key)
        .set("ssl.key.password", Secured::CLIENT_KEY_PASSWORD);
    describe_unknown(&config).await.expect("mutual TLS");
    // A wrong key password is refused when the client is made, naming the key.
    let e = KafkaClient::new(&config.clone().set("ssl.key.password", "wrong")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("ssl.key.location"), "{e}");
    let e = KafkaClient::new(&config.set("ssl.key.password", "")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leadership_round_on_the_secured_cluster() {
    init_tracing();
    let cluster = secured();
    let config = cluster
        .config("SCRAM-SHA-512", "admin")
        .with_state_topic(unique("krabka-test-secured-state"));
    let client = Client::new(config.clone()).expect("client");
    client
        .ensure_state_topic(TopicSpec::development())
        .await
        .expect("the state topic");
    // A data topic for the guarded write, made the same way.
    let data = config
        .clone()
        .with_state_topic(unique("krabka-test-secured-data"));
    krabka_coordination::transport::kafka::ensure_state_topic(&data, 1, 1, 1)
        .await
        .expect("the data topic");
    let role = unique("secured-role");
    let options = client
        .leadership_options()
        .with_lease_duration(Duration::from_secs(10))
        .with_renew_interval(Duration::from_secs(2));
    let leader = client.acquire(&role, "a", options).await.expect("acquire");
    leader
        .write(vec![data_record(data.state_topic(), 0, b"secured")])
        .await
        .expect("a guarded write");
    let status = client.describe_leadership(&role).await.expect("describe");
    assert!(status.authoritative(&leader.token()), "{status:?}");
    // The protocol client alone, with another mechanism, sees the same.
    let other = KafkaClient::new(&cluster.config("PLAIN", "admin")).unwrap();
    assert_eq!(other.describe_epoch(&role).await.unwrap(), leader.token());
    let token = leader.token();
    leader.resign().await.expect("resign");
    let status = client.describe_leadership(&role).await.expect("describe");
    assert!(!status.authoritative(&token), "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_with_a_wrong_password_fails_promptly_and_registers_nothing() {
    init_tracing();
    let cluster = secured();
    let config = cluster
        .config("SCRAM-SHA-512", "admin")
        .set("sasl.password", "not-the-password");
    let client = Client::new(config).expect("client");
    let role = unique("secured-wrong-password");
    let (tx, mut rx) = events::channel();
    let options = client.leadership_options().with_events(tx);
    let msg = prompt_fatal("acquire", async {
        client.acquire(&role, "m", options).await.map(drop)
    })
    .await;
    assert!(
        msg.contains("SCRAM-SHA-512") && msg.contains("\"admin\""),
        "{msg}"
    );
    let mut kinds = Vec::new();
    while let Ok(e) = rx.try_recv() {
        kinds.push(e.kind.name());
    }
    assert!(!kinds.contains(&"registered"), "{kinds:?}");
    assert!(client.claimed_roles().is_empty());
    // The topic helpers say the same at once.
    let msg = prompt_fatal("ensure_state_topic", async {
        client
            .ensure_state_topic(TopicSpec::development())
            .await
            .map(drop)
    })
    .await;
    assert!(msg.contains("SCRAM-SHA-512"), "{msg}");
    let msg = prompt_fatal("describe_leadership", async {
        client.describe_leadership(&role).await.map(drop)
    })
    .await;
    assert!(msg.contains("SCRAM-SHA-512"), "{msg}");
}
