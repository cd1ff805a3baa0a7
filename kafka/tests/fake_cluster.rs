//! The client's failure handling against scripted fake brokers: what each
//! failure is reported as (the error kind, and a message naming the broker,
//! the request and the code) and how long the client takes to report it
//! (bounded by the deadline or timeout it was given).
//!
//! Real time, with short timeouts: the whole file runs in a few seconds.
//! Run with `cargo test -p krabka-kafka --features fake-broker`.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::describe_transactions_response::TransactionState;
use kafka_protocol::messages::{ApiKey, DescribeTransactionsResponse, ProducerId, TransactionalId};
use kafka_protocol::protocol::StrBytes;
use krabka_kafka::fake_broker::{
    end_txn, error_for, find_coordinator, response_frame, sasl_handshake, truncated, Endpoint,
    FakeBroker, Reply, Request,
};
use krabka_kafka::security::{Mechanism, Protocol, SaslSettings, Security};
use krabka_kafka::{deadline_in, Client, Error, ProducerEpoch, Settings, TxnError};
use tokio::time::Instant;

/// The transactional id of every test.
const ID: &str = "billing-role";
/// What a bounded call may take beyond its bound (scheduling, loopback).
const MARGIN: Duration = Duration::from_millis(200);

/// A plaintext client of `bootstrap` with these timeouts.
fn client(bootstrap: &str, operation: Duration, connect: Duration) -> Client {
    let mut settings = Settings::new(bootstrap);
    settings.operation_timeout = operation;
    settings.connect_timeout = connect;
    Client::new(&settings).expect("valid settings")
}

/// A SASL_PLAINTEXT PLAIN client of `broker` as user "alice".
fn sasl_client(broker: &FakeBroker, password: &str) -> Client {
    let mut settings = Settings::new(broker.addr());
    settings.operation_timeout = Duration::from_secs(2);
    settings.connect_timeout = Duration::from_secs(2);
    settings.security = Security {
        protocol: Protocol::SaslPlaintext,
        tls: None,
        sasl: Some(SaslSettings::password(Mechanism::Plain, "alice", password)),
    };
    Client::new(&settings).expect("valid settings")
}

/// Awaits `call`, insisting that it takes at most `bound` + [`MARGIN`];
/// returns its output and how long it took.
async fn timed<T>(what: &str, bound: Duration, call: impl Future<Output = T>) -> (T, Duration) {
    let started = Instant::now();
    let out = tokio::time::timeout(bound + 10 * MARGIN, call)
        .await
        .unwrap_or_else(|_| panic!("{what}: no outcome within {:?}", bound + 10 * MARGIN));
    let took = started.elapsed();
    eprintln!("{what}: {took:?} (bound {bound:?})");
    assert!(
        took <= bound + MARGIN,
        "{what} took {took:?}, over {bound:?} + {MARGIN:?}"
    );
    (out, took)
}

/// How many requests of `key` `broker` has read.
fn count(broker: &FakeBroker, key: ApiKey) -> usize {
    broker.requests().iter().filter(|r| r.is(key)).count()
}

/// The connections `broker` read requests of `key` on, in order.
fn connections_of(broker: &FakeBroker, key: ApiKey) -> Vec<usize> {
    let requests = broker.requests();
    requests
        .iter()
        .filter(|r| r.is(key))
        .map(|r| r.connection)
        .collect()
}

/// The message of a Transient error, or a panic naming what came instead.
fn transient<T: std::fmt::Debug>(what: &str, outcome: Result<T, Error>) -> String {
    match outcome {
        Err(e @ Error::Transient { .. }) => e.to_string(),
        other => panic!("{what}: expected Transient, got {other:?}"),
    }
}

/// The message of a Fatal error, or a panic naming what came instead.
fn fatal<T: std::fmt::Debug>(what: &str, outcome: Result<T, Error>) -> String {
    match outcome {
        Err(e @ Error::Fatal { .. }) => format!("{e} / {e:?}"),
        other => panic!("{what}: expected Fatal, got {other:?}"),
    }
}

/// Asserts that `message` contains every one of `parts`.
fn names(message: &str, parts: &[&str]) {
    eprintln!("  {message}");
    for part in parts {
        assert!(message.contains(part), "{part:?} is not in: {message}");
    }
}

/// A successful DescribeTransactions v0 answer: [`ID`] is `Ongoing` with
/// producer `producer`.
fn described(request: &Request, producer: ProducerEpoch) -> Reply {
    let state = TransactionState::default()
        .with_error_code(0)
        .with_transactional_id(TransactionalId(StrBytes::from_static_str(ID)))
        .with_transaction_state(StrBytes::from_static_str("Ongoing"))
        .with_transaction_timeout_ms(10_000)
        .with_transaction_start_time_ms(1_700_000_000_000)
        .with_producer_id(ProducerId(producer.producer_id))
        .with_producer_epoch(producer.producer_epoch);
    let answer = DescribeTransactionsResponse::default().with_transaction_states(vec![state]);
    Reply::of(request, &answer)
}

/// A broker that names itself the coordinator and answers every other
/// request with `rest`.
fn own_coordinator(rest: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> FakeBroker {
    let me: Arc<OnceLock<Endpoint>> = Arc::default();
    let endpoint = Arc::clone(&me);
    let broker = FakeBroker::start(move |req| match (req.key(), endpoint.get()) {
        (Some(ApiKey::FindCoordinator), Some(me)) => find_coordinator(req, me),
        (Some(ApiKey::ApiVersions), _) => Reply::Default,
        _ => rest(req),
    });
    me.set(broker.endpoint()).expect("set once");
    broker
}

#[tokio::test]
async fn not_coordinator_finds_the_moved_coordinator_and_asks_it() {
    let moved_to = ProducerEpoch::new(9001, 4);
    let (a, b) = coordinator_moving_to_b(moved_to, false);
    let operation = Duration::from_millis(800);
    let c = client(&a.addr(), operation, operation);

    let (outcome, _) = timed(
        "describe after NOT_COORDINATOR",
        operation,
        c.describe_transaction(ID),
    )
    .await;
    let d = outcome
        .expect("answered by the moved coordinator")
        .expect("B knows the id");
    assert_eq!(d.producer, moved_to);
    assert_eq!(d.state, "Ongoing");
    assert_eq!(count(&a, ApiKey::FindCoordinator), 2, "found again at A");
    assert_eq!(count(&a, ApiKey::DescribeTransactions), 1);
    assert_eq!(count(&b, ApiKey::DescribeTransactions), 1);
    assert_eq!(count(&b, ApiKey::FindCoordinator), 0);
    // The cache now names B: the next describe costs one round trip there.
    c.describe_transaction(ID)
        .await
        .expect("cached")
        .expect("known");
    assert_eq!(count(&a, ApiKey::FindCoordinator), 2);
    assert_eq!(count(&b, ApiKey::DescribeTransactions), 2);
}

/// Two brokers: A names itself the coordinator of [`ID`] in its first
/// FindCoordinator and B in every later one, answers every InitProducerId
/// NOT_COORDINATOR, and DescribeTransactions too unless `a_describes` (then
/// it describes the id as held by `token`, a view not yet moved); B
/// describes `token` and mints or bumps to `token` + 1.
fn coordinator_moving_to_b(token: ProducerEpoch, a_describes: bool) -> (FakeBroker, FakeBroker) {
    let b = FakeBroker::start(move |req| match req.key() {
        Some(ApiKey::DescribeTransactions) => described(req, token),
        Some(ApiKey::InitProducerId) => krabka_kafka::fake_broker::init_producer_id(
            req,
            token.producer_id,
            token.producer_epoch + 1,
        ),
        Some(ApiKey::ApiVersions) => Reply::Default,
        _ => Reply::ScriptError(format!("B was not asked key {}", req.api_key)),
    });
    let b_endpoint = b.endpoint();
    let a_endpoint: Arc<OnceLock<Endpoint>> = Arc::default();
    let a_self = Arc::clone(&a_endpoint);
    let a = FakeBroker::start(move |req| match req.key() {
        Some(ApiKey::FindCoordinator) if req.key_index == 0 => {
            find_coordinator(req, a_self.get().expect("set at start"))
        }
        Some(ApiKey::FindCoordinator) => find_coordinator(req, &b_endpoint),
        Some(ApiKey::DescribeTransactions) if a_describes => described(req, token),
        // NOT_COORDINATOR
        Some(ApiKey::DescribeTransactions | ApiKey::InitProducerId) => error_for(req, 16),
        _ => Reply::Default,
    });
    a_endpoint.set(a.endpoint()).expect("set once");
    (a, b)
}

/// A mint answered NOT_COORDINATOR by a former coordinator (Kafka moved
/// the id's partition, as a preferred-leader election does) forgets it and
/// mints at the coordinator found again: before the fix, every later
/// attempt went back to the former one until the deadline, and a caller
/// that retries (an acquire) retried there forever.
#[tokio::test]
async fn a_mint_answered_not_coordinator_finds_the_moved_coordinator() {
    let token = ProducerEpoch::new(9001, 4);
    let (a, b) = coordinator_moving_to_b(token, true);
    let operation = Duration::from_millis(800);
    let c = client(&a.addr(), operation, operation);

    let (minted, _) = timed(
        "InitProducerId after NOT_COORDINATOR",
        operation,
        c.init_producer_id(ID, 10_000, deadline_in(operation)),
    )
    .await;
    assert_eq!(
        minted.expect("minted at the moved coordinator"),
        ProducerEpoch::new(9001, 5)
    );
    assert_eq!(count(&a, ApiKey::InitProducerId), 1, "asked A once");
    assert_eq!(count(&a, ApiKey::FindCoordinator), 2, "found again at A");
    assert_eq!(count(&b, ApiKey::InitProducerId), 1);
}

/// The conditional bump of a resign, answered NOT_COORDINATOR, likewise
/// finds the moved coordinator, checks the token there and bumps there.
#[tokio::test]
async fn a_conditional_bump_answered_not_coordinator_finds_the_moved_coordinator() {
    let token = ProducerEpoch::new(9001, 4);
    let (a, b) = coordinator_moving_to_b(token, true);
    let operation = Duration::from_millis(800);
    let c = client(&a.addr(), operation, operation);

    let (bumped, _) = timed(
        "conditional bump after NOT_COORDINATOR",
        operation,
        c.bump_if_current(ID, token, 10_000, operation),
    )
    .await;
    assert_eq!(
        bumped.expect("bumped at the moved coordinator"),
        krabka_kafka::BumpAnswer::Bumped(ProducerEpoch::new(9001, 5))
    );
    assert_eq!(count(&a, ApiKey::InitProducerId), 1, "asked A once");
    assert_eq!(count(&b, ApiKey::DescribeTransactions), 1, "checked at B");
    assert_eq!(count(&b, ApiKey::InitProducerId), 1);
}

#[tokio::test]
async fn concurrent_transactions_past_the_deadline_backs_off_then_fails_transient() {
    let broker = own_coordinator(|req| match req.key() {
        Some(ApiKey::InitProducerId) => error_for(req, 51), // CONCURRENT_TRANSACTIONS
        _ => Reply::ScriptError(format!("unexpected key {}", req.api_key)),
    });
    let c = client(
        &broker.addr(),
        Duration::from_secs(5),
        Duration::from_secs(5),
    );
    let budget = Duration::from_millis(500);

    let (outcome, took) = timed(
        "InitProducerId under CONCURRENT_TRANSACTIONS",
        budget,
        c.init_producer_id(ID, 10_000, deadline_in(budget)),
    )
    .await;
    let message = transient("InitProducerId", outcome);
    names(&message, &["InitProducerId", ID, "code 51"]);
    assert!(took >= budget / 2, "gave up early, after {took:?}");
    // 3 ms pauses for the first ten answers, then doubling to 100 ms:
    // about 18 attempts in 500 ms. Without back-off, over a hundred.
    let attempts: Vec<Instant> = broker
        .requests()
        .iter()
        .filter(|r| r.is(ApiKey::InitProducerId))
        .map(|r| r.at)
        .collect();
    eprintln!("{} InitProducerId attempts", attempts.len());
    assert!(
        (8..=40).contains(&attempts.len()),
        "{} attempts in {budget:?}",
        attempts.len()
    );
    // The pauses grew past the 3 ms of the first tries.
    let widest = attempts.windows(2).map(|w| w[1] - w[0]).max();
    assert!(
        widest >= Some(Duration::from_millis(45)),
        "widest gap {widest:?}"
    );
    assert_eq!(
        count(&broker, ApiKey::FindCoordinator),
        1,
        "the coordinator stayed"
    );
}

#[tokio::test]
async fn a_lost_end_txn_answer_is_a_retry_within_the_deadline_and_the_retry_commits() {
    let broker = own_coordinator(|req| match req.key() {
        Some(ApiKey::EndTxn) if req.key_index == 0 => Reply::Silence,
        Some(ApiKey::EndTxn) => end_txn(req, 0),
        _ => Reply::ScriptError(format!("unexpected key {}", req.api_key)),
    });
    let addr = broker.addr();
    let c = client(&addr, Duration::from_secs(5), Duration::from_secs(5));
    let token = ProducerEpoch::new(4242, 7);
    let deadline = Duration::from_millis(400);

    let (outcome, took) = timed(
        "EndTxn without an answer",
        deadline,
        c.end_txn(ID, token, true, deadline_in(deadline)),
    )
    .await;
    match outcome {
        Err(TxnError::Retry(why)) => names(&why, &["EndTxn", &addr, "no response in time"]),
        other => panic!("expected TxnError::Retry, got {other:?}"),
    }
    assert!(
        took >= deadline - Duration::from_millis(50),
        "after {took:?}"
    );

    let (outcome, _) = timed(
        "EndTxn retried",
        deadline,
        c.end_txn(ID, token, true, deadline_in(deadline)),
    )
    .await;
    outcome.expect("the retried EndTxn commits");
    assert_eq!(count(&broker, ApiKey::EndTxn), 2);
}

#[tokio::test]
async fn a_truncated_answer_is_transient_and_a_new_connection_mends_it() {
    let healed = Arc::new(AtomicBool::new(false));
    let producer = ProducerEpoch::new(77, 1);
    let broker = own_coordinator({
        let healed = Arc::clone(&healed);
        move |req| match req.key() {
            Some(ApiKey::DescribeTransactions) if !healed.load(Ordering::SeqCst) => {
                let Reply::Respond(body) = described(req, producer) else {
                    return Reply::ScriptError("no DescribeTransactions answer".into());
                };
                let frame = response_frame(req.api_key, req.api_version, req.correlation_id, &body);
                // The size announces the whole frame; ten bytes are missing.
                Reply::RawThenClose(truncated(&frame, frame.len() - 10))
            }
            Some(ApiKey::DescribeTransactions) => described(req, producer),
            _ => Reply::ScriptError(format!("unexpected key {}", req.api_key)),
        }
    });
    let addr = broker.addr();
    let operation = Duration::from_millis(500);
    let c = client(&addr, operation, operation);

    let (outcome, _) = timed(
        "describe with truncated answers",
        operation,
        c.describe_transaction(ID),
    )
    .await;
    let message = transient("describe", outcome);
    names(
        &message,
        &["DescribeTransactions", ID, &addr, "read failed"],
    );
    // Each attempt met a closed connection and made a new one.
    let broken = connections_of(&broker, ApiKey::DescribeTransactions);
    assert!(broken.len() >= 2, "retried within the timeout: {broken:?}");
    assert!(broken.windows(2).all(|w| w[0] < w[1]), "{broken:?}");

    healed.store(true, Ordering::SeqCst);
    let d = c
        .describe_transaction(ID)
        .await
        .expect("answered on a new connection")
        .expect("known");
    assert_eq!(d.producer, producer);
    let all = connections_of(&broker, ApiKey::DescribeTransactions);
    assert!(all[all.len() - 1] > broken[broken.len() - 1], "{all:?}");
}

#[tokio::test]
async fn a_huge_array_count_is_refused_by_the_frame_check_naming_the_field() {
    // DescribeTransactions v0 (flexible): throttle_time_ms, then a compact
    // array whose count (the varint minus one) is 0x7fff_ffff, and nothing.
    let mut body = BytesMut::new();
    body.put_i32(0);
    body.put_slice(&[0x80, 0x80, 0x80, 0x80, 0x08]); // varint 0x8000_0000
    body.put_u8(0); // no tagged fields
    let body = body.freeze();
    let broker = own_coordinator(move |req| match req.key() {
        Some(ApiKey::DescribeTransactions) => Reply::Raw(response_frame(
            req.api_key,
            req.api_version,
            req.correlation_id,
            &body,
        )),
        _ => Reply::ScriptError(format!("unexpected key {}", req.api_key)),
    });
    let addr = broker.addr();
    let operation = Duration::from_millis(400);
    let c = client(&addr, operation, operation);

    let (outcome, _) = timed(
        "describe with a huge array count",
        operation,
        c.describe_transaction(ID),
    )
    .await;
    let message = transient("describe", outcome);
    names(
        &message,
        &[
            "DescribeTransactions",
            &addr,
            "transaction_states",
            "2147483647",
        ],
    );
    // A refused frame closes its connection: no request shares the stream.
    let used = connections_of(&broker, ApiKey::DescribeTransactions);
    assert!(!used.is_empty());
    assert!(used.windows(2).all(|w| w[0] < w[1]), "{used:?}");
}

#[tokio::test]
async fn a_sasl_mechanism_the_broker_does_not_enable_is_fatal_at_once() {
    let broker = FakeBroker::start(|req| match req.key() {
        Some(ApiKey::SaslHandshake) => sasl_handshake(req, 33, &["SCRAM-SHA-512"]),
        Some(ApiKey::ApiVersions) => Reply::Default,
        _ => Reply::ScriptError(format!("unexpected key {}", req.api_key)),
    });
    let c = sasl_client(&broker, "s3cret-pw");

    let (outcome, _) = timed(
        "describe, mechanism not enabled",
        Duration::from_millis(300),
        c.describe_transaction(ID),
    )
    .await;
    let message = fatal("describe", outcome);
    names(
        &message,
        &["PLAIN", "SCRAM-SHA-512", "\"alice\"", &broker.addr()],
    );
    assert!(!message.contains("s3cret-pw"), "{message}");
    assert_eq!(broker.connections(), 1, "never retried");
    assert_eq!(count(&broker, ApiKey::SaslAuthenticate), 0);
}

#[tokio::test]
async fn refused_sasl_credentials_are_fatal_naming_the_user_not_the_password() {
    let broker = FakeBroker::start(|req| match req.key() {
        Some(ApiKey::SaslHandshake) => sasl_handshake(req, 0, &["PLAIN"]),
        Some(ApiKey::SaslAuthenticate) => error_for(req, 58), // SASL_AUTHENTICATION_FAILED
        Some(ApiKey::ApiVersions) => Reply::Default,
        _ => Reply::ScriptError(format!("unexpected key {}", req.api_key)),
    });
    let c = sasl_client(&broker, "s3cret-pw");

    let (outcome, _) = timed(
        "describe, credentials refused",
        Duration::from_millis(300),
        c.describe_transaction(ID),
    )
    .await;
    let message = fatal("describe", outcome);
    names(
        &message,
        &["SASL PLAIN", "\"alice\"", "code 58", &broker.addr()],
    );
    assert!(!message.contains("s3cret-pw"), "{message}");
    assert_eq!(broker.connections(), 1, "never retried");
    assert_eq!(count(&broker, ApiKey::SaslAuthenticate), 1);
}

#[tokio::test]
async fn an_unreachable_bootstrap_is_transient_naming_it_within_the_connect_timeout() {
    // A port nothing listens on: bound, then freed.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .to_string();
    let connect = Duration::from_millis(400);
    let c = client(&addr, Duration::from_secs(10), connect);

    let (outcome, took) = timed(
        "describe, bootstrap unreachable",
        connect,
        c.describe_transaction(ID),
    )
    .await;
    let message = transient("describe", outcome);
    names(
        &message,
        &[
            "DescribeTransactions",
            &addr,
            "connect timeout",
            "connecting to",
        ],
    );
    // Refused connects are retried (20, 40, 80, 160 ms apart), not given
    // up at the first.
    assert!(took >= Duration::from_millis(150), "gave up after {took:?}");
    assert_eq!(c.connections_made(), 0);
}

/// A first bootstrap broker that accepts connections and never answers
/// (paused, say) gets a share of the budget, not all of it: the lookup goes
/// on to the second broker in time, and later lookups try the stalled one
/// last.
#[tokio::test]
async fn a_stalled_first_bootstrap_broker_is_routed_around() {
    let stalled = FakeBroker::start(|_| Reply::Silence);
    let healthy_producer = ProducerEpoch::new(77, 2);
    let healthy = own_coordinator(move |req| match req.key() {
        Some(ApiKey::DescribeTransactions) => described(req, healthy_producer),
        _ => Reply::ScriptError(format!("unexpected key {}", req.api_key)),
    });
    let budget = Duration::from_millis(1_200);
    let c = client(
        &format!("{},{}", stalled.addr(), healthy.addr()),
        budget,
        budget,
    );

    let (outcome, took) = timed(
        "describe with the first bootstrap broker stalled",
        budget,
        c.describe_transaction(ID),
    )
    .await;
    let d = outcome
        .expect("the second bootstrap broker answers")
        .expect("it knows the id");
    assert_eq!(d.producer, healthy_producer);
    // The stalled broker had its share (half of the budget: two brokers),
    // not the whole budget.
    assert!(took < budget * 3 / 4, "{took:?}");
    assert!(c.is_stalled(&stalled.addr()));
    assert_eq!(count(&stalled, ApiKey::ApiVersions), 1);

    // The next lookup (a new id: not cached) asks the healthy broker first.
    let (outcome, took) = timed(
        "a second lookup",
        Duration::from_millis(100),
        c.coordinator_address("another-role"),
    )
    .await;
    assert_eq!(outcome.expect("found"), healthy.addr());
    assert!(took < Duration::from_millis(100), "{took:?}");
    assert_eq!(
        count(&stalled, ApiKey::ApiVersions),
        1,
        "the stalled broker was not tried again"
    );
}

/// A coordinator whose connection accepts the request and never answers
/// (paused, cut off): the attempt gives up after the request timeout, not
/// the caller's whole budget; the broker is marked stalled, the cached
/// coordinator forgotten, and the next attempt looks it up again and asks
/// the one FindCoordinator names now.
/// The transaction coordinator C, which describes [`ID`] as held by
/// [`MOVED_TO`], and a bootstrap broker that names `first` the coordinator
/// at the first FindCoordinator and C at every later one: a coordinator
/// that fails and the one found when the client looks again.
fn first_then_c(first: Endpoint) -> (FakeBroker, FakeBroker) {
    let c_broker = FakeBroker::start(move |req| match req.key() {
        Some(ApiKey::DescribeTransactions) => described(req, MOVED_TO),
        Some(ApiKey::ApiVersions) => Reply::Default,
        _ => Reply::ScriptError(format!("C was not asked key {}", req.api_key)),
    });
    let c_at = c_broker.endpoint();
    let bootstrap = FakeBroker::start(move |req| match req.key() {
        Some(ApiKey::FindCoordinator) if req.key_index == 0 => find_coordinator(req, &first),
        Some(ApiKey::FindCoordinator) => find_coordinator(req, &c_at),
        _ => Reply::Default,
    });
    (c_broker, bootstrap)
}

/// The producer C names as [`ID`]'s (see [`first_then_c`]).
const MOVED_TO: ProducerEpoch = ProducerEpoch::new(4242, 7);

#[tokio::test]
async fn a_silent_coordinator_costs_one_request_timeout_then_it_is_looked_up_again() {
    let silent = FakeBroker::start(|req| match req.key() {
        Some(ApiKey::ApiVersions) => Reply::Default,
        _ => Reply::Silence,
    });
    let (c_broker, bootstrap) = first_then_c(silent.endpoint());
    let request_timeout = Duration::from_millis(400);
    let mut settings = Settings::new(bootstrap.addr());
    settings.operation_timeout = Duration::from_secs(5);
    settings.request_timeout = request_timeout;
    let client = Client::new(&settings).expect("valid settings");

    let (outcome, took) = timed(
        "describe with a silent coordinator",
        request_timeout + Duration::from_millis(300),
        client.describe_transaction(ID),
    )
    .await;
    let d = outcome
        .expect("answered by the coordinator found next")
        .expect("C knows the id");
    assert_eq!(d.producer, MOVED_TO);
    assert!(
        took >= request_timeout,
        "the silent broker had its attempt: {took:?}"
    );
    assert!(client.is_stalled(&silent.addr()));
    assert_eq!(count(&silent, ApiKey::DescribeTransactions), 1);
    assert_eq!(
        count(&bootstrap, ApiKey::FindCoordinator),
        2,
        "looked up again"
    );
    assert_eq!(count(&c_broker, ApiKey::DescribeTransactions), 1);
}

/// A leader that never answers a Produce: one attempt of the transactional
/// Produce ends at the request timeout as a retry (its outcome unknown),
/// and the leader is forgotten, so the next attempt asks Metadata again.
#[tokio::test]
async fn a_silent_partition_leader_is_a_retry_after_the_request_timeout_and_forgotten() {
    use krabka_kafka::fake_broker::metadata;
    let silent = FakeBroker::start(|req| match req.key() {
        Some(ApiKey::ApiVersions) => Reply::Default,
        _ => Reply::Silence,
    });
    let leader_at = silent.endpoint();
    let bootstrap = FakeBroker::start(move |req| match req.key() {
        Some(ApiKey::Metadata) => metadata(req, "data", &[&leader_at]),
        _ => Reply::Default,
    });
    let request_timeout = Duration::from_millis(300);
    let mut settings = Settings::new(bootstrap.addr());
    settings.request_timeout = request_timeout;
    let client = Client::new(&settings).expect("valid settings");

    let deadline = deadline_in(Duration::from_secs(5));
    let (outcome, took) = timed(
        "one Produce at a silent leader",
        request_timeout,
        client.produce(ID, "data", 0, bytes::Bytes::from_static(b"batch"), deadline),
    )
    .await;
    match outcome {
        Err(TxnError::Retry(why)) => names(&why, &["Produce", &silent.addr()]),
        other => panic!("expected Retry, got {other:?}"),
    }
    assert!(took >= request_timeout * 9 / 10, "{took:?}");
    assert!(client.is_stalled(&silent.addr()));
    assert_eq!(count(&bootstrap, ApiKey::Metadata), 1);
    let _ = client
        .produce(
            ID,
            "data",
            0,
            bytes::Bytes::from_static(b"batch"),
            deadline_in(request_timeout),
        )
        .await;
    assert_eq!(
        count(&bootstrap, ApiKey::Metadata),
        2,
        "the leader was forgotten"
    );
}

/// A coordinator cut off from its peers and from the controller cannot end
/// the transaction it holds, and never learns that the cluster moved its
/// partition: it answers CONCURRENT_TRANSACTIONS (and names itself in
/// FindCoordinator) for as long as the cut lasts. Past two seconds of it the
/// client looks the coordinator up again, asking the other brokers first,
/// and goes to the one they name.
#[tokio::test]
async fn a_coordinator_busy_for_seconds_is_looked_up_again_at_the_other_brokers() {
    let healthy = own_coordinator(|req| match req.key() {
        Some(ApiKey::InitProducerId) => krabka_kafka::fake_broker::init_producer_id(req, 4242, 7),
        _ => Reply::ScriptError(format!("unexpected key {}", req.api_key)),
    });
    let stale = own_coordinator(|req| match req.key() {
        Some(ApiKey::InitProducerId) => error_for(req, 51), // CONCURRENT_TRANSACTIONS
        _ => Reply::ScriptError(format!("unexpected key {}", req.api_key)),
    });
    // The stale broker first in the bootstrap list.
    let bootstrap = format!("{},{}", stale.addr(), healthy.addr());
    let c = client(&bootstrap, Duration::from_secs(10), Duration::from_secs(5));
    let budget = Duration::from_secs(6);
    let (outcome, took) = timed(
        "InitProducerId at a stale busy coordinator",
        budget,
        c.init_producer_id(ID, 10_000, deadline_in(budget)),
    )
    .await;
    assert_eq!(
        outcome.expect("the healthy coordinator answers"),
        ProducerEpoch::new(4242, 7)
    );
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(4),
        "looked up again after about two seconds of CONCURRENT_TRANSACTIONS: {took:?}"
    );
    assert_eq!(
        count(&stale, ApiKey::FindCoordinator),
        1,
        "not asked again first"
    );
    assert_eq!(count(&healthy, ApiKey::FindCoordinator), 1);
    assert_eq!(count(&healthy, ApiKey::InitProducerId), 1);
}

/// The versions a broker speaks, checked before a member registers: a
/// broker without a request a member sends is refused at once, naming the
/// broker, the request, the version and the Kafka release that brought it;
/// one without broker-side transaction verification is a warning.
#[tokio::test]
async fn a_broker_too_old_is_refused_at_start_naming_what_it_lacks() {
    use krabka_kafka::fake_broker::{default_api_versions, Config};
    let without = |key: ApiKey| -> Vec<(i16, i16, i16)> {
        default_api_versions()
            .into_iter()
            .filter(|(k, _, _)| *k != key as i16)
            .collect()
    };
    // Kafka 2.8: DescribeTransactions came with 3.0.
    let old = FakeBroker::start_with(
        Config {
            api_versions: without(ApiKey::DescribeTransactions),
            ..Config::default()
        },
        |_| Reply::Default,
    );
    let c = client(&old.addr(), Duration::from_secs(2), Duration::from_secs(2));
    let (outcome, _) = timed(
        "the version check",
        Duration::from_secs(2),
        c.check_versions(),
    )
    .await;
    let message = fatal("check_versions", outcome);
    names(
        &message,
        &[
            &old.addr(),
            "DescribeTransactions v0 or newer (Kafka 3.0)",
            "Kafka 3.6 or newer",
        ],
    );
    assert!(!message.contains("DescribeProducers"), "{message}");

    // OffsetFetch below v7 (no `require_stable`): the committed offsets a
    // new leader resumes from could be about to be replaced.
    let mut versions = without(ApiKey::OffsetFetch);
    versions.push((ApiKey::OffsetFetch as i16, 0, 6));
    let no_stable = FakeBroker::start_with(
        Config {
            api_versions: versions,
            ..Config::default()
        },
        |_| Reply::Default,
    );
    let c = client(
        &no_stable.addr(),
        Duration::from_secs(2),
        Duration::from_secs(2),
    );
    let (outcome, _) = timed(
        "the version check",
        Duration::from_secs(2),
        c.check_versions(),
    )
    .await;
    let message = fatal("check_versions", outcome);
    names(&message, &["OffsetFetch v7 or newer (Kafka 2.5)"]);

    // Kafka 3.5: everything, but no verification (AddPartitionsToTxn v4).
    let mut versions = without(ApiKey::AddPartitionsToTxn);
    versions.push((ApiKey::AddPartitionsToTxn as i16, 0, 3));
    let older = FakeBroker::start_with(
        Config {
            api_versions: versions,
            ..Config::default()
        },
        |_| Reply::Default,
    );
    let c = client(
        &older.addr(),
        Duration::from_secs(2),
        Duration::from_secs(2),
    );
    let found = c
        .check_versions()
        .await
        .expect("a broker of 3.5 speaks every request; the core refuses it for verification");
    assert_eq!(
        found,
        krabka_kafka::client::Versions {
            broker: older.addr(),
            verification: false
        }
    );

    // A current broker: verification advertised.
    let current = FakeBroker::start(|_| Reply::Default);
    let c = client(
        &current.addr(),
        Duration::from_secs(2),
        Duration::from_secs(2),
    );
    assert!(c.check_versions().await.expect("current").verification);
}

/// A plaintext client of `bootstrap` with this request timeout, an
/// operation timeout of 10 s and a connect timeout of 3 s.
fn client_with_request_timeout(bootstrap: &str, request: Duration) -> Client {
    let mut settings = Settings::new(bootstrap);
    settings.operation_timeout = Duration::from_secs(10);
    settings.connect_timeout = Duration::from_secs(3);
    settings.request_timeout = request;
    Client::new(&settings).expect("valid settings")
}

/// `n` describes of [`ID`] at once through `client`, each answered with
/// `producer`.
async fn describe_at_once(client: &Client, n: usize, producer: ProducerEpoch) {
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..n {
        let c = client.clone();
        tasks.spawn(async move { c.describe_transaction(ID).await });
    }
    while let Some(out) = tasks.join_next().await {
        let d = out.expect("no panic").expect("answered").expect("known");
        assert_eq!(d.producer, producer);
    }
}

/// A coordinator that answers every request, slowly but surely: 150 ms
/// each, one at a time per connection. Five requests at once per
/// connection the client may open are more than they carry in one request
/// timeout (400 ms): the last ones wait 750 ms. They wait in the client
/// for a connection of their own, so each attempt's timeout measures the
/// broker's 150 ms only: every request is answered at its first attempt, no connection is
/// given up, and the broker is never taken for a stalled one. (Sent on a
/// busy connection, a request waited behind the others at the broker on
/// its own attempt's clock: those behind ran out of time, closed their
/// connections and marked the broker stalled.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_beyond_the_connections_wait_their_turn_without_timing_out() {
    const N: usize = 5 * Client::CONNECTIONS_PER_BROKER;
    let producer = ProducerEpoch::new(11, 3);
    let broker = own_coordinator(move |req| match req.key() {
        Some(ApiKey::DescribeTransactions) => {
            Reply::delay(Duration::from_millis(150), described(req, producer))
        }
        _ => Reply::ScriptError(format!("unexpected key {}", req.api_key)),
    });
    let client = client_with_request_timeout(&broker.addr(), Duration::from_millis(400));
    // The coordinator known first, so the burst below is DescribeTransactions only.
    client.describe_transaction(ID).await.expect("answered");

    let started = Instant::now();
    describe_at_once(&client, N, producer).await;
    let took = started.elapsed();
    eprintln!("{N} requests, 150 ms each at the broker: {took:?}");
    assert!(
        took >= Duration::from_millis(700),
        "the broker answers one request per connection at a time: {took:?}"
    );
    assert_eq!(
        count(&broker, ApiKey::DescribeTransactions),
        N + 1,
        "each request answered at its first attempt"
    );
    assert_eq!(
        client.connections_made(),
        Client::CONNECTIONS_PER_BROKER as u64,
        "no connection given up, none beyond the bound"
    );
    assert_eq!(
        count(&broker, ApiKey::FindCoordinator),
        1,
        "the coordinator never looked up again"
    );
    assert!(!client.is_stalled(&broker.addr()));
}

/// A coordinator that goes silent under five requests at once per
/// connection the client may open: those on its connections run out of
/// time (the request timeout, 400 ms), and those waiting for a connection
/// do not queue behind them for attempts of their own at a broker that
/// answers nothing. They go to the
/// coordinator looked up again (C) when the first attempt times out, and
/// every request is answered within about one request timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_waiting_for_a_silent_brokers_connections_go_elsewhere_at_its_first_timeout() {
    const N: usize = 5 * Client::CONNECTIONS_PER_BROKER;
    let silent = FakeBroker::start(|req| match req.key() {
        Some(ApiKey::ApiVersions) => Reply::Default,
        _ => Reply::Silence,
    });
    let (c_broker, bootstrap) = first_then_c(silent.endpoint());
    let request_timeout = Duration::from_millis(400);
    let client = client_with_request_timeout(&bootstrap.addr(), request_timeout);
    // The silent broker is the coordinator the client knows.
    let known = client.coordinator_address(ID).await.expect("looked up");
    assert_eq!(known, silent.addr());

    let (_, took) = timed(
        "describes at a coordinator that went silent",
        request_timeout + Duration::from_millis(400),
        describe_at_once(&client, N, MOVED_TO),
    )
    .await;
    assert!(
        took >= request_timeout,
        "the first attempts timed out: {took:?}"
    );
    assert_eq!(
        count(&silent, ApiKey::DescribeTransactions),
        Client::CONNECTIONS_PER_BROKER,
        "one attempt per connection at the silent broker, no more"
    );
    assert_eq!(count(&c_broker, ApiKey::DescribeTransactions), N);
}

/// A coordinator that takes connections and never answers their
/// handshake (ApiVersions): a connect there is one attempt, bounded by the
/// request timeout (400 ms) as a request is, not by the connect timeout
/// (3 s), and the requests waiting for that connect, or for a connection
/// at all, go to the coordinator looked up again (C) when it fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_that_never_finishes_a_handshake_costs_one_request_timeout() {
    const N: usize = 2 * Client::CONNECTIONS_PER_BROKER;
    let mute = FakeBroker::start(|_| Reply::Silence);
    let (c_broker, bootstrap) = first_then_c(mute.endpoint());
    let request_timeout = Duration::from_millis(400);
    let client = client_with_request_timeout(&bootstrap.addr(), request_timeout);
    assert_eq!(
        client.coordinator_address(ID).await.expect("looked up"),
        mute.addr()
    );

    let (_, took) = timed(
        "describes at a coordinator that never finishes a handshake",
        request_timeout + Duration::from_millis(400),
        describe_at_once(&client, N, MOVED_TO),
    )
    .await;
    assert!(
        took >= request_timeout,
        "the connect had its attempt: {took:?}"
    );
    assert_eq!(
        count(&mute, ApiKey::ApiVersions),
        1,
        "one connect at a time to a broker with none up"
    );
    assert_eq!(count(&c_broker, ApiKey::DescribeTransactions), N);
}

/// Three bootstrap brokers: A, first in the list, has a stale view and
/// names B the coordinator at every FindCoordinator; B refuses everything
/// with NOT_COORDINATOR; C names itself and mints. A lookup answered by A
/// with a broker that refuses is asked of the other brokers next (B, the
/// refusing one, last): the mint reaches C within its bound, where before
/// every lookup went back to A and the mint ran out of time.
#[tokio::test]
async fn a_bootstrap_broker_naming_a_refusing_coordinator_is_not_asked_first_again() {
    let c_broker = own_coordinator(|req| match req.key() {
        Some(ApiKey::InitProducerId) => krabka_kafka::fake_broker::init_producer_id(req, 4242, 7),
        _ => Reply::ScriptError(format!("C was not asked key {}", req.api_key)),
    });
    let b_broker = FakeBroker::start(|req| match req.key() {
        Some(ApiKey::ApiVersions) => Reply::Default,
        _ => error_for(req, 16), // NOT_COORDINATOR
    });
    let b_at = b_broker.endpoint();
    let a_broker = FakeBroker::start(move |req| match req.key() {
        Some(ApiKey::FindCoordinator) => find_coordinator(req, &b_at),
        _ => Reply::Default,
    });
    let bootstrap = format!(
        "{},{},{}",
        a_broker.addr(),
        b_broker.addr(),
        c_broker.addr()
    );
    let operation = Duration::from_millis(1_500);
    let c = client(&bootstrap, operation, operation);
    let (minted, _) = timed(
        "InitProducerId past a stale bootstrap broker",
        operation,
        c.init_producer_id(ID, 10_000, deadline_in(operation)),
    )
    .await;
    assert_eq!(minted.expect("minted at C"), ProducerEpoch::new(4242, 7));
    assert_eq!(count(&a_broker, ApiKey::FindCoordinator), 1, "A asked once");
    assert_eq!(
        count(&b_broker, ApiKey::InitProducerId),
        1,
        "B refused once"
    );
    assert_eq!(count(&c_broker, ApiKey::FindCoordinator), 1);
    assert_eq!(count(&c_broker, ApiKey::InitProducerId), 1);
}

/// A coordinator cached at X while the bootstrap broker's FindCoordinator
/// names Y from its second answer on (the cluster moved the id's
/// partition, and X, cut off, still answers from memory): describes go to
/// X until the cached coordinator is [`COORDINATOR_MAX_AGE`] old, then the
/// next one asks FindCoordinator again and goes to Y.
#[tokio::test(start_paused = true)]
async fn a_cached_coordinator_is_asked_about_again_once_it_has_aged() {
    use krabka_kafka::client::COORDINATOR_MAX_AGE;
    let old = ProducerEpoch::new(1, 1);
    let new = ProducerEpoch::new(2, 2);
    let x = own_coordinator(move |req| match req.key() {
        Some(ApiKey::DescribeTransactions) => described(req, old),
        _ => Reply::ScriptError(format!("X was not asked key {}", req.api_key)),
    });
    let (y, boot) = first_then(x.endpoint(), new);
    let c = client(&boot.addr(), Duration::from_secs(5), Duration::from_secs(5));
    let described_now = || async { c.describe_transaction(ID).await.unwrap().unwrap().producer };

    assert_eq!(described_now().await, old);
    tokio::time::sleep(COORDINATOR_MAX_AGE - Duration::from_millis(100)).await;
    assert_eq!(described_now().await, old, "still young: no second look");
    assert_eq!(count(&boot, ApiKey::FindCoordinator), 1);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(described_now().await, new, "aged: looked up again");
    assert_eq!(count(&boot, ApiKey::FindCoordinator), 2);
    assert_eq!(count(&x, ApiKey::DescribeTransactions), 2);
    assert_eq!(count(&y, ApiKey::DescribeTransactions), 1);
    // The new coordinator is cached in turn.
    assert_eq!(described_now().await, new);
    assert_eq!(count(&boot, ApiKey::FindCoordinator), 2);
}

/// The coordinator Y, which describes [`ID`] as held by `producer`, and a
/// bootstrap broker that names `first` at its first FindCoordinator and Y
/// at every later one.
fn first_then(first: Endpoint, producer: ProducerEpoch) -> (FakeBroker, FakeBroker) {
    let y = FakeBroker::start(move |req| match req.key() {
        Some(ApiKey::DescribeTransactions) => described(req, producer),
        Some(ApiKey::ApiVersions) => Reply::Default,
        _ => Reply::ScriptError(format!("Y was not asked key {}", req.api_key)),
    });
    let y_at = y.endpoint();
    let boot = FakeBroker::start(move |req| match req.key() {
        Some(ApiKey::FindCoordinator) if req.key_index == 0 => find_coordinator(req, &first),
        Some(ApiKey::FindCoordinator) => find_coordinator(req, &y_at),
        _ => Reply::Default,
    });
    (y, boot)
}

/// Many transactional ids looked up once each (a role per job) and then
/// never again: the coordinator cache drops them once they are
/// [`FORGET_AFTER`] old, at the first lookup after, instead of holding every
/// id the process ever touched.
#[tokio::test(start_paused = true)]
async fn the_coordinator_cache_forgets_ids_no_longer_used() {
    use krabka_kafka::client::{COORDINATOR_MAX_AGE, FORGET_AFTER};
    let broker = own_coordinator(|req| Reply::ScriptError(format!("key {}", req.api_key)));
    let c = client(
        &broker.addr(),
        Duration::from_secs(5),
        Duration::from_secs(5),
    );
    for i in 0..500 {
        c.coordinator_address(&format!("job-{i}")).await.unwrap();
    }
    assert_eq!(c.coordinators_cached(), 500);
    tokio::time::sleep(FORGET_AFTER).await;
    c.coordinator_address("job-next").await.unwrap();
    assert_eq!(c.coordinators_cached(), 1, "the aged ids were dropped");
    // Ids looked up less than FORGET_AFTER ago stay, and a sweep runs at
    // most once per COORDINATOR_MAX_AGE.
    for i in 0..100 {
        tokio::time::sleep(COORDINATOR_MAX_AGE / 10).await;
        c.coordinator_address(&format!("late-{i}")).await.unwrap();
        let bound = usize::try_from(
            (FORGET_AFTER + COORDINATOR_MAX_AGE).as_millis()
                / (COORDINATOR_MAX_AGE / 10).as_millis(),
        )
        .unwrap()
            + 2;
        assert!(
            c.coordinators_cached() <= bound,
            "{} cached",
            c.coordinators_cached()
        );
    }
    assert!(c.coordinators_cached() >= 20, "ids in use stay cached");
}

/// The same for a partition's leader: A, first in the bootstrap list,
/// names B the leader of `data`/0 at every Metadata; B answers every
/// Produce NOT_LEADER_OR_FOLLOWER; C names itself and takes the Produce.
/// The Metadata after B's refusal begins after A, so the second Produce
/// reaches C, where before every Metadata went back to A.
#[tokio::test]
async fn a_bootstrap_broker_naming_a_refusing_leader_is_not_asked_first_again() {
    use krabka_kafka::fake_broker::metadata;
    let c_me: Arc<OnceLock<Endpoint>> = Arc::default();
    let c_self = Arc::clone(&c_me);
    let c_broker = FakeBroker::start(move |req| match req.key() {
        Some(ApiKey::Metadata) => metadata(req, "data", &[c_self.get().expect("set")]),
        Some(ApiKey::Produce) => error_for(req, 0),
        _ => Reply::Default,
    });
    c_me.set(c_broker.endpoint()).expect("set once");
    let b_broker = FakeBroker::start(|req| match req.key() {
        Some(ApiKey::ApiVersions) => Reply::Default,
        _ => error_for(req, 6), // NOT_LEADER_OR_FOLLOWER
    });
    let b_at = b_broker.endpoint();
    let a_broker = FakeBroker::start(move |req| match req.key() {
        Some(ApiKey::Metadata) => metadata(req, "data", &[&b_at]),
        _ => Reply::Default,
    });
    let bootstrap = format!(
        "{},{},{}",
        a_broker.addr(),
        b_broker.addr(),
        c_broker.addr()
    );
    let c = client(&bootstrap, Duration::from_secs(2), Duration::from_secs(2));
    let deadline = deadline_in(Duration::from_secs(1));
    let batch = bytes::Bytes::from_static(b"batch");
    let mut tries = 0;
    while Instant::now() < deadline {
        tries += 1;
        match c.produce(ID, "data", 0, batch.clone(), deadline).await {
            Ok(_) => break,
            Err(TxnError::Retry(why)) => eprintln!("retry: {why}"),
            Err(other) => panic!("{other:?}"),
        }
    }
    assert_eq!(tries, 2, "the second Produce reached C");
    assert_eq!(count(&a_broker, ApiKey::Metadata), 1, "A asked once");
    assert_eq!(count(&b_broker, ApiKey::Produce), 1, "B refused once");
    assert_eq!(count(&c_broker, ApiKey::Metadata), 1);
    assert_eq!(count(&c_broker, ApiKey::Produce), 1);
}

/// What one broker of [`scripted_cluster`] answers, given every broker's
/// endpoint (in node id order) and its own index there; ApiVersions and
/// Metadata are answered for it.
type BrokerScript = Box<dyn Fn(&Request, &[Endpoint], usize) -> Reply + Send + Sync>;

/// Brokers with node ids 1, 2, ..., one per script. Each answers Metadata
/// (at most the one of [`Client::describe_transaction_confirmed`], for
/// `__transaction_state`) listing every broker of the cluster, and the
/// rest of its requests with its script.
fn scripted_cluster(scripts: Vec<BrokerScript>) -> Vec<FakeBroker> {
    scripted_cluster_listing(scripts, <[Endpoint]>::to_vec)
}

/// [`scripted_cluster`], Metadata listing the brokers as `listed` gives
/// them from their endpoints.
fn scripted_cluster_listing(
    scripts: Vec<BrokerScript>,
    listed: impl Fn(&[Endpoint]) -> Vec<Endpoint> + Send + Sync + 'static,
) -> Vec<FakeBroker> {
    let listed = Arc::new(listed);
    let all: Arc<OnceLock<Vec<Endpoint>>> = Arc::default();
    let brokers: Vec<FakeBroker> = scripts
        .into_iter()
        .enumerate()
        .map(|(i, script)| {
            let all = Arc::clone(&all);
            let listed = Arc::clone(&listed);
            let config = krabka_kafka::fake_broker::Config {
                node_id: i32::try_from(i).expect("few brokers") + 1,
                ..Default::default()
            };
            FakeBroker::start_with(config, move |req| {
                let all = all.get().expect("set once every broker started");
                match req.key() {
                    Some(ApiKey::ApiVersions) => Reply::Default,
                    Some(ApiKey::Metadata) => {
                        let listed = listed(all);
                        let leaders: Vec<&Endpoint> = listed.iter().collect();
                        krabka_kafka::fake_broker::metadata(req, "__transaction_state", &leaders)
                    }
                    _ => script(req, all, i),
                }
            })
        })
        .collect();
    all.set(brokers.iter().map(FakeBroker::endpoint).collect())
        .expect("set once");
    brokers
}

/// A broker script that names broker `named` (an index) the coordinator
/// at every FindCoordinator and describes [`ID`] as held by `producer`.
fn naming(named: usize, producer: ProducerEpoch) -> BrokerScript {
    Box::new(move |req, all, _| match req.key() {
        Some(ApiKey::FindCoordinator) => find_coordinator(req, &all[named]),
        Some(ApiKey::DescribeTransactions) => described(req, producer),
        _ => Reply::ScriptError(format!("key {} was not expected", req.api_key)),
    })
}

/// A broker script that answers nothing but ApiVersions and Metadata: it
/// reads every other request and never answers it.
fn silent() -> BrokerScript {
    Box::new(|_, _, _| Reply::Silence)
}

/// A client of these brokers, in this order, with these timeouts.
fn client_of(brokers: &[&FakeBroker], operation: Duration, request: Duration) -> Client {
    let bootstrap: Vec<String> = brokers.iter().map(|b| b.addr()).collect();
    let mut settings = Settings::new(bootstrap.join(","));
    settings.operation_timeout = operation;
    settings.connect_timeout = operation;
    settings.request_timeout = request;
    Client::new(&settings).expect("valid settings")
}

/// The epoch a cut-off coordinator still describes, and the one its
/// successor minted at the coordinator the cluster moved the id to.
const OLD: ProducerEpoch = ProducerEpoch::new(4242, 3);
const NEW: ProducerEpoch = ProducerEpoch::new(4242, 4);

/// X (first in the bootstrap list) is a coordinator cut off from the
/// cluster: it names itself at FindCoordinator and describes the old
/// epoch. Y and Z both name Y, which describes the new one. The confirmed
/// describe refuses X's answer (no other broker names X), looks the
/// coordinator up at the others and returns Y's epoch; X is never asked
/// to describe again while the cache names Y.
#[tokio::test]
async fn a_confirmed_describe_refuses_a_cut_off_coordinator_and_finds_the_new_one() {
    let cluster = scripted_cluster(vec![naming(0, OLD), naming(1, NEW), naming(1, NEW)]);
    let [x, y, z] = &cluster[..] else {
        unreachable!()
    };
    let operation = Duration::from_millis(1_500);
    let c = client_of(&[x, y, z], operation, operation);

    for n in 0..3 {
        let (outcome, _) = timed(
            "confirmed describe with a cut-off coordinator first",
            operation,
            c.describe_transaction_confirmed(ID),
        )
        .await;
        let d = outcome.expect("confirmed").expect("known");
        assert_eq!(d.producer, NEW, "describe {n}: the cut-off answer is taken");
    }
    assert_eq!(
        count(x, ApiKey::DescribeTransactions),
        1,
        "X's answer refused once, never asked again"
    );
    assert_eq!(count(y, ApiKey::DescribeTransactions), 3);
    // The describe at Y costs one FindCoordinator at another broker: X,
    // first by node id, names itself, so Z is asked too.
    assert_eq!(
        count(z, ApiKey::FindCoordinator),
        1 + 3,
        "Z named Y each time"
    );
}

/// Y, the real coordinator, answers; of the other brokers, X (asked first,
/// lowest node id) is cut off and names itself, and Z names Y. One broker
/// naming Y is enough: Y's answer is taken, after X and Z were asked.
#[tokio::test]
async fn a_coordinator_confirmed_by_one_other_broker_is_taken_though_a_cut_off_one_dissents() {
    let cluster = scripted_cluster(vec![naming(0, OLD), naming(1, NEW), naming(1, NEW)]);
    let [x, y, z] = &cluster[..] else {
        unreachable!()
    };
    let operation = Duration::from_millis(1_500);
    // Y first: the lookup names Y at once.
    let c = client_of(&[y, x, z], operation, operation);

    let (outcome, _) = timed(
        "confirmed describe at the real coordinator",
        operation,
        c.describe_transaction_confirmed(ID),
    )
    .await;
    assert_eq!(outcome.expect("confirmed").expect("known").producer, NEW);
    assert_eq!(count(y, ApiKey::DescribeTransactions), 1, "taken at once");
    assert_eq!(count(x, ApiKey::DescribeTransactions), 0);
    assert_eq!(
        count(x, ApiKey::FindCoordinator),
        1,
        "X asked, and dissented"
    );
    assert_eq!(
        count(z, ApiKey::FindCoordinator),
        1,
        "Z asked, and confirmed"
    );
    assert_eq!(count(y, ApiKey::FindCoordinator), 1, "the lookup only");
}

/// X answers, and no other broker answers FindCoordinator at all: the
/// answer is never taken, and the call ends Transient within its
/// operation timeout, saying that no other broker confirmed X.
#[tokio::test]
async fn a_describe_no_other_broker_confirms_ends_transient_at_its_deadline() {
    let cluster = scripted_cluster(vec![naming(0, OLD), silent(), silent()]);
    let [x, y, z] = &cluster[..] else {
        unreachable!()
    };
    let operation = Duration::from_millis(1_500);
    let c = client_of(&[x], operation, Duration::from_millis(300));

    let (outcome, took) = timed(
        "confirmed describe with silent peers",
        operation,
        c.describe_transaction_confirmed(ID),
    )
    .await;
    let message = transient("confirmed describe with silent peers", outcome);
    names(
        &message,
        &[
            ID,
            &x.addr(),
            "is not taken",
            "no other broker confirmed it is the coordinator",
        ],
    );
    assert!(took >= operation - MARGIN, "ran to its deadline: {took:?}");
    assert!(count(x, ApiKey::DescribeTransactions) >= 1);
    assert!(count(y, ApiKey::FindCoordinator) >= 1);
    assert!(count(z, ApiKey::FindCoordinator) >= 1);
}

/// A cluster of one broker has no other broker to confirm its answers:
/// they are taken as they are, with no FindCoordinator after the
/// describe (the one Metadata says the cluster has one broker).
#[tokio::test]
async fn a_one_broker_clusters_answer_is_taken_without_a_confirmation() {
    let cluster = scripted_cluster(vec![naming(0, NEW)]);
    let x = &cluster[0];
    let operation = Duration::from_millis(1_500);
    let c = client_of(&[x], operation, operation);

    for _ in 0..2 {
        let (outcome, _) = timed(
            "confirmed describe on one broker",
            operation,
            c.describe_transaction_confirmed(ID),
        )
        .await;
        assert_eq!(outcome.expect("taken").expect("known").producer, NEW);
    }
    let keys: Vec<i16> = x
        .requests()
        .iter()
        .map(|r| r.api_key)
        .filter(|k| *k != ApiKey::ApiVersions as i16)
        .collect();
    assert_eq!(
        keys,
        [
            ApiKey::FindCoordinator as i16,
            ApiKey::DescribeTransactions as i16,
            ApiKey::Metadata as i16,
            ApiKey::DescribeTransactions as i16,
        ],
        "the lookup, then each describe, the broker list asked once"
    );
}

/// The healthy path's cost: each confirmed describe is one
/// DescribeTransactions at the coordinator and one FindCoordinator at one
/// other broker, the broker list is asked once, and again only once it is
/// [`BROKERS_MAX_AGE`] old.
#[tokio::test(start_paused = true)]
async fn a_confirmed_describe_costs_one_find_coordinator_at_another_broker() {
    use krabka_kafka::client::BROKERS_MAX_AGE;
    let cluster = scripted_cluster(vec![naming(1, NEW), naming(1, NEW), naming(1, NEW)]);
    let [x, y, z] = &cluster[..] else {
        unreachable!()
    };
    let c = client_of(&[x, y, z], Duration::from_secs(5), Duration::from_secs(5));
    let all = || [x, y, z];
    let total = |key| all().iter().map(|b| count(b, key)).sum::<usize>();

    const N: usize = 4;
    for n in 1..=N {
        let d = c.describe_transaction_confirmed(ID).await.unwrap().unwrap();
        assert_eq!(d.producer, NEW);
        assert_eq!(count(y, ApiKey::DescribeTransactions), n);
        assert_eq!(total(ApiKey::DescribeTransactions), n);
        // The lookup (at X), then one confirmation per describe.
        assert_eq!(total(ApiKey::FindCoordinator), 1 + n, "describe {n}");
        assert_eq!(count(y, ApiKey::FindCoordinator), 0, "never at Y");
        assert_eq!(total(ApiKey::Metadata), 1);
    }
    // Every confirmation came after the describe it confirms.
    let describes: Vec<Instant> = y
        .requests()
        .iter()
        .filter(|r| r.is(ApiKey::DescribeTransactions))
        .map(|r| r.at)
        .collect();
    let confirms: Vec<Instant> = x
        .requests()
        .iter()
        .filter(|r| r.is(ApiKey::FindCoordinator))
        .skip(1)
        .map(|r| r.at)
        .collect();
    assert_eq!(confirms.len(), N, "X, first of the others, confirmed each");
    for (d, f) in describes.iter().zip(&confirms) {
        assert!(f >= d);
    }

    tokio::time::sleep(BROKERS_MAX_AGE - Duration::from_millis(100)).await;
    c.describe_transaction_confirmed(ID).await.unwrap().unwrap();
    assert_eq!(total(ApiKey::Metadata), 1, "the broker list still young");
    tokio::time::sleep(Duration::from_millis(100)).await;
    c.describe_transaction_confirmed(ID).await.unwrap().unwrap();
    assert_eq!(total(ApiKey::Metadata), 2, "asked again once aged");
}

/// `e` under another name: `localhost` for `127.0.0.1`, the same broker.
fn alias(e: &Endpoint) -> Endpoint {
    Endpoint {
        host: "localhost".to_owned(),
        ..e.clone()
    }
}

/// The cut-off coordinator X is listed by Metadata under another address
/// (`localhost`) than the one FindCoordinator names (`127.0.0.1`): it is
/// the same broker (node 1), and is not asked to confirm itself. Before
/// brokers were told apart by node id, X's alias was asked first and X,
/// naming itself, confirmed its own stale answer.
#[tokio::test]
async fn a_coordinator_listed_under_another_address_does_not_confirm_itself() {
    let cluster = scripted_cluster_listing(
        vec![naming(0, OLD), naming(1, NEW), naming(1, NEW)],
        |all| vec![alias(&all[0]), all[1].clone(), all[2].clone()],
    );
    let [x, y, z] = &cluster[..] else {
        unreachable!()
    };
    let operation = Duration::from_millis(1_500);
    let c = client_of(&[x, y, z], operation, operation);

    let (outcome, _) = timed(
        "confirmed describe, the cut-off coordinator listed under an alias",
        operation,
        c.describe_transaction_confirmed(ID),
    )
    .await;
    assert_eq!(outcome.expect("confirmed").expect("known").producer, NEW);
    assert_eq!(
        count(x, ApiKey::FindCoordinator),
        1 + 1,
        "the lookup, and once to confirm Y's answer (X named itself)"
    );
    assert_eq!(count(x, ApiKey::DescribeTransactions), 1, "refused");
    assert_eq!(count(y, ApiKey::DescribeTransactions), 1);
}

/// Z names the real coordinator Y under another address than the one Y
/// was found at (another listener or name of node 2): that confirms Y.
/// Before, it was taken as naming another broker: Y's answer was refused
/// and the describe went round the brokers, asking the cut-off X to
/// describe, until it reached Y under Z's name for it.
#[tokio::test]
async fn a_coordinator_named_under_another_address_is_confirmed() {
    let z_names_y_aliased: BrokerScript = Box::new(|req, all, _| match req.key() {
        Some(ApiKey::FindCoordinator) => find_coordinator(req, &alias(&all[1])),
        _ => Reply::ScriptError(format!("key {} was not expected", req.api_key)),
    });
    let cluster = scripted_cluster(vec![naming(0, OLD), naming(1, NEW), z_names_y_aliased]);
    let [x, y, z] = &cluster[..] else {
        unreachable!()
    };
    let operation = Duration::from_millis(1_500);
    let c = client_of(&[y, x, z], operation, operation);

    let (outcome, _) = timed(
        "confirmed describe, Y named under an alias",
        operation,
        c.describe_transaction_confirmed(ID),
    )
    .await;
    assert_eq!(outcome.expect("confirmed").expect("known").producer, NEW);
    assert_eq!(count(y, ApiKey::DescribeTransactions), 1, "taken at once");
    assert_eq!(count(x, ApiKey::DescribeTransactions), 0);
    assert_eq!(count(z, ApiKey::FindCoordinator), 1);
}

/// An address no broker listens on (connections to it are refused).
fn dead_endpoint(node_id: i32) -> Endpoint {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("local_addr").port();
    drop(listener);
    Endpoint {
        node_id,
        host: "127.0.0.1".to_owned(),
        port: i32::from(port),
    }
}

/// The first Metadata lists the brokers other than the coordinator Y at
/// addresses where nothing answers any more (restarted under new ones).
/// No broker of that list confirms Y, so the list is forgotten and
/// Metadata asked again at another bootstrap broker: Y's answer is
/// confirmed within the same call. Before, the list was kept for
/// [`BROKERS_MAX_AGE`], and every confirmed describe in that time ended
/// Transient.
#[tokio::test]
async fn a_broker_list_none_of_whose_brokers_answers_is_asked_again_elsewhere() {
    let (dead_x, dead_z) = (dead_endpoint(1), dead_endpoint(3));
    let listed_once = AtomicBool::new(false);
    let cluster = scripted_cluster_listing(
        vec![naming(1, NEW), naming(1, NEW), naming(1, NEW)],
        move |all| {
            if listed_once.swap(true, Ordering::SeqCst) {
                all.to_vec()
            } else {
                vec![dead_x.clone(), all[1].clone(), dead_z.clone()]
            }
        },
    );
    let [x, y, z] = &cluster[..] else {
        unreachable!()
    };
    let operation = Duration::from_millis(1_500);
    let c = client_of(&[x, y, z], operation, operation);

    let (outcome, _) = timed(
        "confirmed describe with an out-of-date broker list",
        operation,
        c.describe_transaction_confirmed(ID),
    )
    .await;
    assert_eq!(outcome.expect("confirmed").expect("known").producer, NEW);
    assert_eq!(count(x, ApiKey::Metadata), 1, "the first list, from X");
    assert_eq!(count(y, ApiKey::Metadata), 1, "asked again, not at X");
    assert_eq!(count(y, ApiKey::DescribeTransactions), 2);
    // The new list is kept: the next describe asks no Metadata.
    c.describe_transaction_confirmed(ID).await.unwrap().unwrap();
    assert_eq!(count(x, ApiKey::Metadata) + count(y, ApiKey::Metadata), 2);
    assert_eq!(count(z, ApiKey::Metadata), 0);
}

/// The other brokers answer FindCoordinator COORDINATOR_NOT_AVAILABLE (the
/// id's partition is moving): X's answer is not taken, the call ends
/// Transient at its deadline naming the code, and the broker list, whose
/// brokers answered, is kept (Metadata asked once).
#[tokio::test]
async fn a_describe_the_other_brokers_cannot_place_yet_is_not_taken() {
    let not_available = || -> BrokerScript {
        Box::new(|req, _, _| match req.key() {
            Some(ApiKey::FindCoordinator) => error_for(req, 15),
            _ => Reply::ScriptError(format!("key {} was not expected", req.api_key)),
        })
    };
    let cluster = scripted_cluster(vec![naming(0, OLD), not_available(), not_available()]);
    let [x, y, z] = &cluster[..] else {
        unreachable!()
    };
    let operation = Duration::from_millis(800);
    let c = client_of(&[x], operation, operation);

    let (outcome, _) = timed(
        "confirmed describe, the others not placing the id",
        operation,
        c.describe_transaction_confirmed(ID),
    )
    .await;
    let message = transient("confirmed describe, others not placing the id", outcome);
    names(
        &message,
        &[
            "is not taken",
            "no other broker confirmed",
            "CoordinatorNotAvailable",
        ],
    );
    assert!(count(y, ApiKey::FindCoordinator) >= 2, "asked on each try");
    assert!(count(z, ApiKey::FindCoordinator) >= 2);
    assert_eq!(count(x, ApiKey::Metadata), 1, "the list kept");
}
