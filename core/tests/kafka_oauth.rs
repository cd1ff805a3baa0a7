//! SASL/OAUTHBEARER with a token the caller supplies, on the
//! secured cluster (`ci/kafka.sh start secured`), whose broker takes any
//! unsigned JWT (Kafka's unsecured validator; the principal is the token's
//! `sub`). Every client of the project takes its token from the provider
//! given to the `KafkaConfig`: the protocol client (DescribeTransactions,
//! FindCoordinator) and the librdkafka clients of a leadership round
//! (producers, state readers, the admin client of the topic helpers).
//!
//! The failures that must be prompt and clear: a token the broker refuses
//! (`FATAL`, before a member registers), and a token provider that fails
//! (its error, named, at once).
#![cfg(feature = "kafka")]

mod support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use krabka_coordination::client::Client;
use krabka_coordination::events;
use krabka_coordination::transport::kafka::{
    KafkaClient, KafkaConfig, OAuthToken, OAuthTokenError, TopicSpec,
};
use krabka_coordination::{Error, ErrorKind, NO_EPOCH};
use support::*;

/// How long a refusal may take: one connect, a TLS handshake and a SASL
/// exchange on loopback, far below the connect timeout.
const PROMPT: Duration = Duration::from_secs(5);

/// OAUTHBEARER over SASL_SSL to `bootstrap`, trusting the secured
/// cluster's CA, with `provider`.
fn oauth_config<F>(bootstrap: &str, provider: F) -> KafkaConfig
where
    F: Fn() -> Result<OAuthToken, OAuthTokenError> + Send + Sync + 'static,
{
    config(bootstrap)
        .set("security.protocol", "SASL_SSL")
        .set("sasl.mechanism", "OAUTHBEARER")
        .set("ssl.ca.location", secured().ca)
        .with_oauth_token_provider(provider)
}

/// A provider of unsigned JWTs for `sub` living `life`, counting its calls.
fn jwt_provider(
    sub: &'static str,
    life: Duration,
    calls: &Arc<AtomicU32>,
) -> impl Fn() -> Result<OAuthToken, OAuthTokenError> + Send + Sync + 'static {
    let calls = Arc::clone(calls);
    move || {
        calls.fetch_add(1, Ordering::SeqCst);
        // The JWT's `exp` is in whole seconds: the token expires then.
        let exp = (SystemTime::now() + life)
            .duration_since(UNIX_EPOCH)
            .expect("after 1970")
            .as_secs();
        let exp = UNIX_EPOCH + Duration::from_secs(exp);
        Ok(OAuthToken::new(unsigned_jwt(sub, exp), exp).with_principal(sub))
    }
}

/// Describes a role no one took and finds its coordinator.
async fn describe_unknown(config: &KafkaConfig) -> Result<(), Error> {
    let client = KafkaClient::new(config)?;
    let role = unique("oauth-nobody");
    assert_eq!(client.describe_epoch(&role).await?, NO_EPOCH);
    let coordinator = client.coordinator_address(&role).await?;
    assert!(coordinator.starts_with("localhost:"), "{coordinator}");
    Ok(())
}

/// Waits for `call`, checks that it failed with `kind` within [`PROMPT`],
/// returns the message.
async fn prompt_error(
    what: &str,
    kind: ErrorKind,
    call: impl std::future::Future<Output = Result<(), Error>>,
) -> String {
    let started = Instant::now();
    let e = tokio::time::timeout(Duration::from_secs(30), call)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within 30 s"))
        .expect_err(what);
    let took = started.elapsed();
    eprintln!("{what}: after {took:?}: {e}");
    assert_eq!(e.kind(), kind, "{what}: {e}");
    assert!(
        took < PROMPT,
        "{what}: the error took {took:?} (retried?): {e}"
    );
    e.to_string()
}

/// One leadership round through a `Client` with `config`: the state topic
/// and a data topic ensured, acquire, guarded writes and describes for
/// `hold`, a describe through a second protocol client, resign; then, after
/// `idle` without a request, the role described again.
async fn leadership_round(config: &KafkaConfig, hold: Duration, idle: Duration) {
    let config = config
        .clone()
        .with_state_topic(unique("krabka-test-oauth-state"));
    let client = Client::new(config.clone()).expect("client");
    client
        .ensure_state_topic(TopicSpec::development())
        .await
        .expect("the state topic");
    let data = config
        .clone()
        .with_state_topic(unique("krabka-test-oauth-data"));
    krabka_coordination::transport::kafka::ensure_state_topic(&data, 1, 1, 1)
        .await
        .expect("the data topic");
    let role = unique("oauth-role");
    let options = client
        .leadership_options()
        .with_lease_duration(Duration::from_secs(10))
        .with_renew_interval(Duration::from_millis(500));
    let leader = client.acquire(&role, "a", options).await.expect("acquire");
    let token = leader.token();
    // Held for `hold`, with a guarded write and a read of the state now and
    // then: the producers' renewals, the state readers and the protocol
    // client all stay authenticated.
    let until = Instant::now() + hold;
    let mut n = 0;
    loop {
        leader
            .write(vec![data_record(
                data.state_topic(),
                0,
                format!("oauth-{n}").as_bytes(),
            )])
            .await
            .unwrap_or_else(|e| panic!("guarded write {n}: {e}"));
        let status = client.describe_leadership(&role).await.expect("describe");
        assert!(status.authoritative(&token), "{status:?}");
        let state = client
            .describe_role_state(&role)
            .await
            .expect("the role's state");
        let members: Vec<&str> = state.roster.iter().map(|r| r.member.as_str()).collect();
        assert_eq!(members, ["a"], "{state:?}");
        n += 1;
        if Instant::now() >= until {
            break;
        }
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    assert!(leader.is_held(), "the leadership ended while held");
    assert_eq!(leader.token(), token, "the epoch stayed the same");
    // A protocol client of its own, from a clone: same answer.
    let other = KafkaClient::new(&config).unwrap();
    assert_eq!(other.describe_epoch(&role).await.unwrap(), token);
    leader.resign().await.expect("resign");
    let status = client.describe_leadership(&role).await.expect("describe");
    assert!(!status.authoritative(&token), "{status:?}");
    if !idle.is_zero() {
        // Nothing polls the state readers meanwhile.
        tokio::time::sleep(idle).await;
        let status = client.describe_leadership(&role).await.expect("describe");
        assert!(!status.authoritative(&token), "{status:?}");
        // Promptly: a reader whose token expired meanwhile would first fail
        // to re-authenticate and retry.
        let started = Instant::now();
        let state = client
            .describe_role_state(&role)
            .await
            .expect("the role's state after a pause");
        assert!(state.roster.is_empty(), "{state:?}");
        assert!(
            started.elapsed() < PROMPT,
            "reading the state after the pause took {:?}",
            started.elapsed()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_and_a_leadership_round_authenticated_by_oauthbearer() {
    init_tracing();
    let cluster = secured();
    let calls = Arc::new(AtomicU32::new(0));
    let config = oauth_config(
        &cluster.bootstrap,
        jwt_provider("admin", Duration::from_secs(3600), &calls),
    );
    describe_unknown(&config).await.expect("describe");
    leadership_round(&config, Duration::ZERO, Duration::ZERO).await;
    // Every client (the protocol clients, the producers, the readers, the
    // admin clients) took the one token: the provider was asked once.
    assert_eq!(calls.load(Ordering::SeqCst), 1, "token provider calls");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_the_broker_refuses_is_a_prompt_fatal_error() {
    init_tracing();
    let cluster = secured();
    // Not a JWT at all, and a JWT whose own expiry (the broker reads the
    // `exp` claim) has passed although the provider says it is valid.
    let garbage = || {
        Ok(OAuthToken::new(
            "not-a-jwt",
            SystemTime::now() + Duration::from_secs(60),
        ))
    };
    let expired = || {
        let exp = SystemTime::now() - Duration::from_secs(600);
        Ok(OAuthToken::new(
            unsigned_jwt("admin", exp),
            SystemTime::now() + Duration::from_secs(60),
        ))
    };
    for (what, config) in [
        ("not a JWT", oauth_config(&cluster.bootstrap, garbage)),
        ("an expired JWT", oauth_config(&cluster.bootstrap, expired)),
    ] {
        let msg = prompt_error(what, ErrorKind::Fatal, describe_unknown(&config)).await;
        assert!(
            msg.contains("SASL OAUTHBEARER authentication with a token from the token provider")
                && msg.contains("refused"),
            "{what}: {msg}"
        );
        assert!(msg.contains("invalid_token"), "{what}: {msg}");
        assert!(!msg.contains("not-a-jwt"), "the token shows: {msg}");
    }

    // A member with such a token fails as promptly and registers nothing.
    let client = Client::new(oauth_config(&cluster.bootstrap, garbage)).expect("client");
    let role = unique("oauth-refused");
    let (tx, mut rx) = events::channel();
    let options = client.leadership_options().with_events(tx);
    let msg = prompt_error("acquire", ErrorKind::Fatal, async {
        client.acquire(&role, "m", options).await.map(drop)
    })
    .await;
    assert!(msg.contains("OAUTHBEARER"), "{msg}");
    let mut kinds = Vec::new();
    while let Ok(e) = rx.try_recv() {
        kinds.push(e.kind.name());
    }
    assert!(!kinds.contains(&"registered"), "{kinds:?}");
    // The topic helpers too.
    let msg = prompt_error("ensure_state_topic", ErrorKind::Fatal, async {
        client
            .ensure_state_topic(TopicSpec::development())
            .await
            .map(drop)
    })
    .await;
    assert!(msg.contains("OAUTHBEARER"), "{msg}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_token_provider_is_a_prompt_clear_error() {
    init_tracing();
    let cluster = secured();
    let failing = oauth_config(&cluster.bootstrap, || {
        Err("the identity provider at https://idp.example/token answered 503".into())
    });
    let msg = prompt_error("describe", ErrorKind::Transient, describe_unknown(&failing)).await;
    assert!(
        msg.contains("getting an OAUTHBEARER token from the token provider")
            && msg.contains("answered 503"),
        "{msg}"
    );
    // The provider's own fatal error stays fatal.
    let revoked = oauth_config(&cluster.bootstrap, || {
        Err(Box::new(Error::fatal(
            "fetching a token",
            "the client credentials were revoked",
        )))
    });
    let msg = prompt_error("describe", ErrorKind::Fatal, describe_unknown(&revoked)).await;
    assert!(msg.contains("were revoked"), "{msg}");
    // A panic is an error, not a crash.
    let panicking = oauth_config(&cluster.bootstrap, || panic!("a bug in the provider"));
    let msg = prompt_error("describe", ErrorKind::Fatal, describe_unknown(&panicking)).await;
    assert!(msg.contains("a bug in the provider"), "{msg}");
    // An expired token is refused before it is sent.
    let stale = oauth_config(&cluster.bootstrap, || {
        Ok(OAuthToken::new(
            "x",
            SystemTime::now() - Duration::from_secs(1),
        ))
    });
    let msg = prompt_error(
        "describe",
        ErrorKind::InvalidArgument,
        describe_unknown(&stale),
    )
    .await;
    assert!(msg.contains("expired"), "{msg}");
    // A member: the acquire fails at once, naming the provider.
    let client = Client::new(failing).expect("client");
    let msg = prompt_error("acquire", ErrorKind::Transient, async {
        client
            .acquire(&unique("oauth-no-token"), "m", client.leadership_options())
            .await
            .map(drop)
    })
    .await;
    assert!(msg.contains("answered 503"), "{msg}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_lived_tokens_are_replaced_before_they_expire() {
    init_tracing();
    // On the listener with short SASL sessions (KIP-368): every connection
    // re-authenticates (librdkafka) or is replaced (the protocol client)
    // every couple of seconds, the broker takes a session no longer than
    // its token lives, and refuses an expired token. Tokens of 16 s (15 to
    // 16: `exp` is in whole seconds; librdkafka looks at its token's refresh
    // time once a second, so much shorter tokens could expire before it asks
    // for the next), a round of 10 s (the source fetches the second token
    // half-way through the first) and a pause of 17 s, longer than a token
    // lives: it only lasts if every client keeps taking new tokens, the idle
    // state readers included.
    let calls = Arc::new(AtomicU32::new(0));
    let config = oauth_config(
        &secured_reauth_bootstrap(),
        jwt_provider("admin", Duration::from_secs(16), &calls),
    );
    leadership_round(&config, Duration::from_secs(10), Duration::from_secs(17)).await;
    let calls = calls.load(Ordering::SeqCst);
    assert!(
        calls >= 3,
        "a 10 s round and a 17 s pause on 16 s tokens took only {calls} tokens"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_provider_that_does_not_answer_is_a_transient_error_within_the_connect_timeout() {
    init_tracing();
    let cluster = secured();
    let slow = oauth_config(&cluster.bootstrap, || {
        std::thread::sleep(Duration::from_secs(3));
        Err("too late".into())
    })
    .with_connect_timeout(Duration::from_secs(1));
    let started = Instant::now();
    let e = describe_unknown(&slow).await.expect_err("no token");
    eprintln!("describe after {:?}: {e}", started.elapsed());
    assert_eq!(e.kind(), ErrorKind::Transient, "{e}");
    assert!(
        e.to_string().contains("token provider did not answer"),
        "{e}"
    );
    assert!(started.elapsed() < Duration::from_millis(2500), "{e}");
    // A member: its first connect is bounded the same way.
    let client = Client::new(slow).expect("client");
    let started = Instant::now();
    let e = client
        .acquire(&unique("oauth-slow"), "m", client.leadership_options())
        .await
        .expect_err("no token");
    eprintln!("acquire after {:?}: {e}", started.elapsed());
    assert_eq!(e.kind(), ErrorKind::Transient, "{e}");
    assert!(e.to_string().contains("did not answer"), "{e}");
    assert!(started.elapsed() < Duration::from_millis(2500), "{e}");
}
