//! End to end: leadership on a REAL local Kafka with member PROCESSES (the
//! `member` binary of this crate, `CARGO_BIN_EXE_member`, driven through the
//! shared harness `krabka_examples::process`), short leases (3 s lease, 1 s
//! renew, 1 s stagger).
//!
//! * `sigkill_leader_then_the_next_member_holds_a_committed_lease_within_lease_plus_stagger`
//! * `sigstop_leader_past_its_lease_loses_the_role_after_sigcont_and_exits`
//!   (its own lease expired, or the broker fenced it; never a renewal)
//! * `resign_hands_over_to_the_next_member_within_one_second`
//! * `restarted_member_rejoins_at_the_tail`
//! * `third_party_describe_agrees_with_the_leader_at_each_step` and
//!   `committed_guarded_writes_carry_their_writers_token_in_log_order`: one
//!   scenario (kill, restart, stop and continue, resign, quit) run once and
//!   checked by both.
//!
//! Each test measures from the event it caused (the kill, the resign command)
//! to the next leader's lease as read back from the role's partition, and a
//! third party (its own client) checks `describe_leadership` against the
//! token the leader reports. The members' lines come from the core's typed
//! event stream, stamped with the member's clock at each step. The
//! data-topic check is in `e2e/data_log.rs`.
//!
//! The tests share one cluster (`KRABKA_BOOTSTRAP`, else `ci/kafka.sh start
//! 1`) and run one at a time (timing bounds are asserted); a Kafka that
//! cannot be reached fails them with a message saying so.

mod e2e;

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use e2e::data_log::{check_data_log, DataLog};
use e2e::scene::{serial, Member, Scene, LEASE_MS, RENEW_MS, STAGGER_MS, START};
use krabka_coordination::FencingToken;
use krabka_examples::{exit, now_ms, Signal};

fn an_ok_write(e: &serde_json::Value) -> bool {
    e["event"] == "guarded_write" && e["result"] == "ok"
}

// ------------------------------------------------------------ the tests

#[test]
fn sigkill_leader_then_the_next_member_holds_a_committed_lease_within_lease_plus_stagger() {
    let _serial = serial();
    let scene = Scene::new("kill", false);
    let (mut m, a_token) = scene.start_members(&["a", "b", "c"]);
    scene.assert_describe_agrees(&m[0], a_token);

    let killed_at = now_ms();
    m[0].sigkill();
    let (lease, seen_at) = scene.wait_lease(
        "b",
        a_token,
        Duration::from_millis((LEASE_MS + STAGGER_MS + 5_000) as u64),
    );
    let failover = seen_at - killed_at;
    let (b_token, b_elected) = m[1].elected(Duration::from_secs(1));
    println!(
        "kill -> b's committed lease read back: {failover} ms (b elected at +{} ms; bound {} ms)",
        b_elected["t_ms"].as_i64().unwrap() - killed_at,
        LEASE_MS + STAGGER_MS + 2_000
    );
    assert!(
        failover <= LEASE_MS + STAGGER_MS + 2_000,
        "the new leader's lease was committed {failover} ms after the kill (bound: lease + stagger + 2 s)"
    );
    assert_eq!(lease.token, b_token);
    assert!(
        b_token > a_token,
        "the new token {b_token} must be newer than the dead leader's {a_token}"
    );
    scene.assert_describe_agrees(&m[1], b_token);
    assert!(
        m[2].events().iter().all(|e| e["event"] != "elected"),
        "c must not be elected while b leads"
    );
}

#[test]
fn sigstop_leader_past_its_lease_loses_the_role_after_sigcont_and_exits() {
    let _serial = serial();
    let scene = Scene::new("stop", true);
    let (mut m, a_token) = scene.start_members(&["a", "b"]);
    m[0].wait_event_from(0, START, "an ok guarded write", an_ok_write);
    // The leader renews before it is stopped: the absence of renewals after
    // SIGCONT below is about the resumed process, not one that never renews.
    m[0].wait_event_from(0, START, "a renewal", |e| e["event"] == "renewed");
    scene.assert_describe_agrees(&m[0], a_token);

    let stopped_at = now_ms();
    m[0].signal(Signal::Stop);
    let (_, seen_at) = scene.wait_lease(
        "b",
        a_token,
        Duration::from_millis((LEASE_MS + STAGGER_MS + 5_000) as u64),
    );
    let (b_token, _) = m[1].elected(Duration::from_secs(1));
    println!("stop -> b's committed lease: {} ms", seen_at - stopped_at);
    scene.assert_describe_agrees(&m[1], b_token);
    // Let b write under its term before the old leader wakes up.
    m[1].wait_event_from(
        0,
        Duration::from_secs(5),
        "b's ok guarded write",
        an_ok_write,
    );

    let before = m[0].events().len();
    let continued_at = Instant::now();
    let continued_ms = now_ms();
    m[0].signal(Signal::Continue);
    // The resumed leader's term ends at once: its own lease ran out while it
    // was stopped (the core checks it before any write), or, should a write
    // reach the broker first, the broker fences it.
    let (ended_at, ended) = m[0].wait_event_from(
        before,
        Duration::from_secs(10),
        "the end of its term (fenced or lease_expired)",
        |e| e["event"] == "fenced" || e["event"] == "lease_expired",
    );
    let status = m[0].wait_exit(Duration::from_secs(10));
    println!(
        "cont -> a's term ended and it exited in {:?}: {ended}",
        continued_at.elapsed()
    );
    let lost_code = if ended["event"] == "fenced" {
        assert_eq!(
            ended["kind"], "FENCED",
            "the fence carries its error kind: {ended}"
        );
        exit::FENCED
    } else {
        exit::LEASE_EXPIRED
    };
    assert_eq!(
        status.code(),
        Some(lost_code),
        "the deposed leader must exit with the code of how it lost the role ({ended}): {status}"
    );
    // The resumed process was observed to its end: its term ended in a step
    // it took after SIGCONT, and its last line is the exit with that code.
    assert!(
        ended["t_ms"].as_i64().is_some_and(|t| t >= continued_ms),
        "the term ended after SIGCONT (sent at {continued_ms}): {ended}"
    );
    let (_, exit_line) = m[0].wait_event_from(ended_at, Duration::from_secs(5), "exit", |e| {
        e["event"] == "exit"
    });
    assert_eq!(exit_line["code"], lost_code, "{exit_line}");
    let events = m[0].events();
    let renewed: Vec<i64> = events
        .iter()
        .filter(|e| e["event"] == "renewed")
        .filter_map(|e| e["t_ms"].as_i64())
        .collect();
    assert!(
        renewed.iter().any(|t| *t < stopped_at),
        "the leader renewed before SIGSTOP (at {stopped_at}): {renewed:?}"
    );
    assert!(
        renewed.iter().all(|t| *t < continued_ms),
        "a renewal step was taken after SIGCONT (sent at {continued_ms}): {renewed:?}"
    );
    let after_cont = &events[before..];
    assert!(
        after_cont.iter().all(|e| !(e["event"] == "renewed")),
        "the deposed leader renewed after SIGCONT: {after_cont:?}"
    );
    scene.assert_describe_agrees(&m[1], b_token);
    assert!(
        m[0].events()[ended_at..]
            .iter()
            .any(|e| e["event"] == "deregistered"),
        "the deposed member deregisters before it exits"
    );
    assert_eq!(scene.roster(), ["b"], "the deposed member left the roster");

    let elected: HashMap<FencingToken, String> =
        [(a_token, "a".to_owned()), (b_token, "b".to_owned())].into();
    m[1].send("quit");
    m[1].wait_exit(Duration::from_secs(10));
    let log = check_data_log(
        &scene.bootstrap,
        scene.data_topic.as_deref().unwrap(),
        &elected,
    );
    println!("data log: {log:?}");
    assert!(
        log.problems.is_empty(),
        "data log problems: {:#?}",
        log.problems
    );
    assert!(
        log.per_token.get(&a_token).copied().unwrap_or(0) > 0
            && log.per_token.get(&b_token).copied().unwrap_or(0) > 0
    );
}

#[test]
fn resign_hands_over_to_the_next_member_within_one_second() {
    let _serial = serial();
    let scene = Scene::new("resign", false);
    let (mut m, a_token) = scene.start_members(&["a", "b", "c"]);
    scene.assert_describe_agrees(&m[0], a_token);

    let asked_at = now_ms();
    m[0].send("resign");
    let (lease, seen_at) = scene.wait_lease("b", a_token, Duration::from_secs(5));
    let (b_token, b_elected) = m[1].elected(Duration::from_secs(1));
    let resigned = m[0].wait_event("resigned", Duration::from_secs(5));
    let handover = b_elected["t_ms"].as_i64().unwrap() - asked_at;
    println!(
        "resign -> b elected (its lease committed): {handover} ms; read back by a third party at +{} ms; a's resign took {} ms",
        seen_at - asked_at,
        resigned["took_ms"]
    );
    let challenged = m[1].wait_event("challenging", Duration::from_secs(1));
    let standby_mint_and_lease =
        b_elected["t_ms"].as_i64().unwrap() - challenged["t_ms"].as_i64().unwrap();
    assert!(
        handover < 1_000,
        "hand-over took {handover} ms (bound 1 s): a's resign (mint + tombstone) took {} ms, \
         b's challenge (mint + first lease) {standby_mint_and_lease} ms (where a hand-over's time goes: \
         docs/benchmarks/leadership.md)",
        resigned["took_ms"]
    );
    assert!(
        seen_at - asked_at < 1_000 + 200,
        "the third party read b's lease {} ms after the resign",
        seen_at - asked_at
    );
    assert_eq!(lease.token, b_token);
    assert!(b_token > a_token);
    assert_eq!(
        m[0].wait_exit(Duration::from_secs(10)).code(),
        Some(0),
        "a resigned cleanly"
    );
    scene.assert_describe_agrees(&m[1], b_token);
    assert_eq!(
        scene.roster(),
        ["b", "c"],
        "a deregistered when it resigned"
    );
}

#[test]
fn restarted_member_rejoins_at_the_tail() {
    let _serial = serial();
    let scene = Scene::new("rejoin", false);
    let (mut m, a_token) = scene.start_members(&["a", "b", "c"]);
    m[0].sigkill();
    let (_, _) = scene.wait_lease(
        "b",
        a_token,
        Duration::from_millis((LEASE_MS + STAGGER_MS + 5_000) as u64),
    );
    let (b_token, _) = m[1].elected(Duration::from_secs(1));
    // The dead holder's registration outlives its process only until the
    // winner removes it (so it costs one stagger once, not one per failover).
    scene.wait_roster(&["b", "c"], Duration::from_secs(5));

    let a2 = scene.spawn("a");
    let reg = a2.wait_event("registered", START);
    a2.wait_event("waiting", Duration::from_secs(10));
    let state = scene.state();
    let ranks: Vec<(String, i64)> = state
        .roster
        .iter()
        .map(|e| (e.member.clone(), e.offset))
        .collect();
    println!("after the restart: {ranks:?}");
    assert_eq!(
        scene.roster(),
        ["b", "c", "a"],
        "the recovered member goes to the tail"
    );
    assert_eq!(
        state.roster[2].offset,
        reg["offset"].as_i64().unwrap(),
        "its rank is its new registration's offset"
    );
    // No failback: the restarted member does not take the role back.
    std::thread::sleep(Duration::from_millis((RENEW_MS * 2) as u64));
    assert!(
        a2.events().iter().all(|e| e["event"] != "elected"),
        "the recovered member must not take the role back"
    );
    scene.assert_describe_agrees(&m[1], b_token);
}

// ------------------------------------------------------------ the scenario

/// What the full scenario observed.
#[derive(Debug)]
struct Scenario {
    /// (step, the leader's token as it printed it, describe_leadership's
    /// token, the partition's lease token) at each step.
    checks: Vec<(String, FencingToken, FencingToken, Option<FencingToken>)>,
    /// The last resigned token and what describe said afterwards.
    after_resign: (FencingToken, FencingToken),
    data: DataLog,
    tokens: Vec<FencingToken>,
}

fn scenario() -> &'static Scenario {
    static S: OnceLock<Scenario> = OnceLock::new();
    S.get_or_init(run_scenario)
}

/// a leads and writes; SIGKILL a -> b; a restarts at the tail; SIGSTOP b ->
/// c; SIGCONT b -> b's term ends (lease expired or fenced), it exits 4 or 3;
/// c resigns -> a; a quits (resigns).
fn run_scenario() -> Scenario {
    let _serial = serial();
    let scene = Scene::new("scenario", true);
    let mut checks = Vec::new();
    let mut elected = HashMap::new();
    let mut check = |scene: &Scene, step: &str, leader: &Member, token: FencingToken| {
        let described = scene.described();
        let lease = scene
            .state()
            .lease
            .filter(|l| l.member == leader.id)
            .map(|l| l.token);
        checks.push((step.to_owned(), token, described, lease));
    };
    let long = Duration::from_millis((LEASE_MS + 2 * STAGGER_MS + 5_000) as u64);

    let (mut m, a_token) = scene.start_members(&["a", "b", "c"]);
    elected.insert(a_token, "a".to_owned());
    m[0].wait_event_from(0, START, "a write", an_ok_write);
    check(&scene, "a elected", &m[0], a_token);

    m[0].sigkill();
    scene.wait_lease("b", a_token, long);
    let (b_token, _) = m[1].elected(Duration::from_secs(1));
    elected.insert(b_token, "b".to_owned());
    check(&scene, "a killed, b elected", &m[1], b_token);
    // b removes the dead a's registration; a restarts after that.
    scene.wait_roster(&["b", "c"], Duration::from_secs(5));

    let a2 = scene.spawn("a");
    a2.wait_event("waiting", START);
    assert_eq!(scene.roster(), ["b", "c", "a"]);
    check(&scene, "a restarted at the tail", &m[1], b_token);

    m[1].wait_event_from(0, START, "b write", an_ok_write);
    m[1].signal(Signal::Stop);
    scene.wait_lease("c", b_token, long);
    let (c_token, _) = m[2].elected(Duration::from_secs(1));
    elected.insert(c_token, "c".to_owned());
    check(&scene, "b stopped, c elected", &m[2], c_token);
    m[2].wait_event_from(0, START, "c write", an_ok_write);

    m[1].signal(Signal::Continue);
    let b_status = m[1].wait_exit(Duration::from_secs(15));
    assert!(
        matches!(b_status.code(), Some(exit::FENCED | exit::LEASE_EXPIRED)),
        "b must lose the role after SIGCONT (its lease expired or it was fenced): {b_status}"
    );
    assert_eq!(scene.roster(), ["c", "a"], "the deposed b deregistered");
    check(&scene, "b continued and lost the role", &m[2], c_token);

    m[2].send("resign");
    scene.wait_lease("a", c_token, Duration::from_secs(5));
    let (a2_token, _) = a2.elected(Duration::from_secs(1));
    elected.insert(a2_token, "a".to_owned());
    check(&scene, "c resigned, a elected", &a2, a2_token);
    a2.wait_event_from(0, START, "a write", an_ok_write);
    assert_eq!(m[2].wait_exit(Duration::from_secs(10)).code(), Some(0));

    a2.signal(Signal::Terminate);
    let mut a2 = a2;
    assert_eq!(
        a2.wait_exit(Duration::from_secs(10)).code(),
        Some(0),
        "a resigns on SIGTERM"
    );
    let after_resign = (a2_token, scene.described());

    let data = check_data_log(
        &scene.bootstrap,
        scene.data_topic.as_deref().unwrap(),
        &elected,
    );
    let s = Scenario {
        checks,
        after_resign,
        data,
        tokens: vec![a_token, b_token, c_token, a2_token],
    };
    println!("scenario: {s:#?}");
    s
}

#[test]
fn third_party_describe_agrees_with_the_leader_at_each_step() {
    let s = scenario();
    assert_eq!(s.checks.len(), 6);
    for (step, leader, described, lease) in &s.checks {
        assert_eq!(
            described, leader,
            "{step}: describe_leadership says {described}, the leader holds {leader}"
        );
        assert_eq!(
            lease.as_ref(),
            Some(leader),
            "{step}: the partition's lease is {lease:?}, the leader holds {leader}"
        );
    }
    assert!(
        s.tokens.windows(2).all(|w| w[0] < w[1]),
        "each new leader's token is newer: {:?}",
        s.tokens
    );
    let (resigned, described) = s.after_resign;
    assert!(described > resigned, "after the last resign describe reports {described}, not newer than the resigned {resigned}");
}

#[test]
fn committed_guarded_writes_carry_their_writers_token_in_log_order() {
    let s = scenario();
    assert!(
        s.data.problems.is_empty(),
        "data log problems: {:#?}",
        s.data.problems
    );
    for t in &s.tokens {
        assert!(
            s.data.per_token.get(t).copied().unwrap_or(0) > 0,
            "no committed record of term {t}: {:?}",
            s.data.per_token
        );
    }
    assert!(s.data.committed >= 4, "{:?}", s.data);
    // Every guarded write is its own transaction: one commit marker per
    // record at least, plus the records of aborted (fenced) transactions.
    assert!(
        s.data.aborted_or_control >= s.data.committed,
        "{:?}",
        s.data
    );
}
