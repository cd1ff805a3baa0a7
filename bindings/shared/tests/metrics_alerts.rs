//! The alerts of docs/metrics.md fire on the first event: the shared
//! recorder, installed as this process's recorder, is scraped (its
//! Prometheus text, parsed back) before and after a member's first fence,
//! renewal failure, lost lease, lost challenge and slow renewal on the
//! in-memory transport, and each alert's expression is evaluated over the
//! two scrapes as Prometheus would: `increase(x[w])` exists only for a
//! series present in both scrapes, `a + b` and `a and on (...) b` join
//! series by labels, `sum by (role)` adds the series of a role, and
//! `histogram_quantile` interpolates within the bucket the rank falls in.
//! The tests of a role-wide alert use a role of their own: the recorder is
//! the process's, shared by the tests running beside them.
//! A counter that appeared only with its first increment would be missing
//! from the first scrape, and the alert would stay silent.

#[path = "../../../core/tests/world/mod.rs"]
mod world;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use krabka_coordination::leadership::acquire_leadership;
use krabka_coordination::transport::{Coordinator, LeaseWriter, Transport};
use krabka_coordination::FencingToken;
use krabka_coordination_bindings::metrics::{install_global, Registry};
use world::hooked::Hooked;
use world::*;

/// One scrape: every sample's value by (name, sorted labels).
type Scrape = BTreeMap<(String, Vec<(String, String)>), f64>;
/// An instant vector: values by sorted labels.
type Vector = BTreeMap<Vec<(String, String)>, f64>;

/// The recorder, installed by the first call: each test calls it before
/// its members start, so their registrations are recorded.
fn registry() -> &'static Registry {
    install_global().expect("the shared recorder is this test process's recorder")
}

/// Parses the Prometheus text of the recorder (no escaped quotes or commas
/// in these labels), checking each metric has `# HELP` then `# TYPE`.
fn scrape() -> Scrape {
    let text = registry().render();
    let mut out = Scrape::new();
    let mut helped = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            helped = rest.split(' ').next().map(str::to_owned);
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let name = rest.split(' ').next().unwrap();
            assert_eq!(helped.as_deref(), Some(name), "no # HELP before {line}");
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap();
        let (name, labels) = match series.split_once('{') {
            Some((n, l)) => (n, l.trim_end_matches('}')),
            None => (series, ""),
        };
        let mut labels: Vec<(String, String)> = labels
            .split(',')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap();
                (k.to_owned(), v.trim_matches('"').to_owned())
            })
            .collect();
        labels.sort();
        out.insert((name.to_owned(), labels), value.parse().unwrap());
    }
    out
}

/// `increase(name[w])` over two scrapes, for `member`'s series: only the
/// series present in both.
fn increase(before: &Scrape, after: &Scrape, name: &str, member: &str) -> Vector {
    selector(after, name, member)
        .into_iter()
        .filter_map(|(l, v)| {
            let was = before.get(&(name.to_owned(), l.clone()))?;
            Some((l, v - was))
        })
        .collect()
}

/// `name{member="..."}` in one scrape.
fn selector(s: &Scrape, name: &str, member: &str) -> Vector {
    s.iter()
        .filter(|((n, l), _)| n == name && l.iter().any(|(k, v)| k == "member" && v == member))
        .map(|((_, l), v)| (l.clone(), *v))
        .collect()
}

/// `a + b`, one-to-one on every label.
fn add(a: &Vector, b: &Vector) -> Vector {
    a.iter()
        .filter_map(|(l, x)| b.get(l).map(|y| (l.clone(), x + y)))
        .collect()
}

/// The series of `v` that pass `keep`.
fn filter(v: Vector, keep: impl Fn(f64) -> bool) -> Vector {
    v.into_iter().filter(|(_, x)| keep(*x)).collect()
}

/// `increase(krabka_fences_total[15m]) + increase(krabka_lease_expirations_total[15m]) > 0`.
fn term_lost(before: &Scrape, after: &Scrape, member: &str) -> Vector {
    let fences = increase(before, after, "krabka_fences_total", member);
    let expired = increase(before, after, "krabka_lease_expirations_total", member);
    filter(add(&fences, &expired), |x| x > 0.0)
}

/// `increase(krabka_renewal_failures_total[5m]) > 0`.
fn renewals_failing(before: &Scrape, after: &Scrape, member: &str) -> Vector {
    let failures = increase(before, after, "krabka_renewal_failures_total", member);
    filter(failures, |x| x > 0.0)
}

/// `krabka_role_held == 1 and on (role, member) increase(krabka_renewals_total[2m]) == 0`.
fn not_renewing(before: &Scrape, after: &Scrape, member: &str) -> Vector {
    let renewals = filter(
        increase(before, after, "krabka_renewals_total", member),
        |x| x == 0.0,
    );
    filter(selector(after, "krabka_role_held", member), |x| x == 1.0)
        .into_iter()
        .filter(|(l, _)| renewals.contains_key(l))
        .collect()
}

/// `name{role="..."}` in one scrape.
fn by_role(s: &Scrape, name: &str, role: &str) -> Vector {
    s.iter()
        .filter(|((n, l), _)| n == name && l.iter().any(|(k, v)| k == "role" && v == role))
        .map(|((_, l), v)| (l.clone(), *v))
        .collect()
}

/// `sum by (role) (krabka_role_held) == 0`, for `role`: the sum when it
/// fires.
fn role_without_leader(s: &Scrape, role: &str) -> Option<f64> {
    let held = by_role(s, "krabka_role_held", role);
    assert!(!held.is_empty(), "no krabka_role_held of {role}");
    let sum: f64 = held.values().sum();
    (sum == 0.0).then_some(sum)
}

/// `histogram_quantile(q, sum by (role, le) (rate(name_bucket[w])))` for
/// `role` over two scrapes, as Prometheus computes it: the rank `q * count`
/// falls in the first bucket whose cumulative increase reaches it, and the
/// value is interpolated linearly within that bucket (from 0 for the
/// first); the upper bound of the last finite bucket when it falls in
/// `+Inf`; `None` (NaN) without observations.
fn quantile(before: &Scrape, after: &Scrape, q: f64, name: &str, role: &str) -> Option<f64> {
    let bucket = format!("{name}_bucket");
    let mut rates: Vec<(f64, f64)> = by_role(after, &bucket, role)
        .into_iter()
        .filter_map(|(l, v)| {
            let was = before.get(&(bucket.clone(), l.clone()))?;
            let le = l.iter().find(|(k, _)| k == "le")?.1.as_str();
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((le, v - was))
        })
        .collect();
    rates.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total = rates.last().filter(|(le, _)| le.is_infinite())?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let (mut lower, mut below) = (0.0, 0.0);
    for &(le, n) in &rates {
        if n >= rank {
            if le.is_infinite() {
                return Some(lower);
            }
            return Some(lower + (le - lower) * (rank - below) / (n - below));
        }
        (lower, below) = (le, n);
    }
    None
}

/// The value of `name` for `member` in one scrape.
fn value(s: &Scrape, name: &str, member: &str) -> Option<f64> {
    let v = selector(s, name, member);
    assert!(v.len() <= 1, "{v:?}");
    v.into_values().next()
}

/// Every alerting counter of `member` is there at zero from its election.
fn assert_all_zero(s: &Scrape, member: &str) {
    for name in [
        "krabka_fences_total",
        "krabka_lease_expirations_total",
        "krabka_renewal_failures_total",
        "krabka_challenges_lost_total",
        "krabka_renewals_total",
        "krabka_resigns_total",
    ] {
        assert_eq!(value(s, name, member), Some(0.0), "{name} of {member}");
    }
}

#[tokio::test(flavor = "current_thread")]
async fn term_lost_fires_on_the_first_fence() {
    registry();
    let w = World::new();
    let a = w.spawn("fenced");
    w.run_until(T0).await;
    let _a = leader(a).await;
    let before = scrape();
    assert_all_zero(&before, "fenced");
    assert!(term_lost(&before, &before, "fenced").is_empty());
    let _newer = w.transport().acquire_epoch(ROLE, LEASE).await.unwrap();
    w.run_until(T0 + ms(RENEW)).await;
    let after = scrape();
    assert_eq!(value(&after, "krabka_fences_total", "fenced"), Some(1.0));
    assert_eq!(term_lost(&before, &after, "fenced").len(), 1);
}

#[tokio::test(flavor = "current_thread")]
async fn term_lost_fires_on_the_first_lease_expiry() {
    registry();
    let w = World::new();
    let a = w.spawn("expiring");
    w.run_until(T0).await;
    let a = leader(a).await;
    let before = scrape();
    assert_all_zero(&before, "expiring");
    w.clock.advance(LEASE + std::time::Duration::from_secs(1));
    assert!(!a.is_held());
    settle().await;
    let after = scrape();
    assert_eq!(
        value(&after, "krabka_lease_expirations_total", "expiring"),
        Some(1.0)
    );
    assert_eq!(term_lost(&before, &after, "expiring").len(), 1);
}

#[tokio::test(flavor = "current_thread")]
async fn renewal_alerts_fire_on_the_first_failure_and_before_the_first_renewal() {
    registry();
    let w = World::new();
    let a = w.spawn("failing");
    w.run_until(T0).await;
    let a = leader(a).await;
    let before = scrape();
    assert_all_zero(&before, "failing");
    assert!(renewals_failing(&before, &before, "failing").is_empty());
    w.cluster.set_unavailable(true);
    w.run_until(T0 + ms(RENEW)).await;
    assert_eq!(a.renewal_failures(), 1);
    let after = scrape();
    assert_eq!(renewals_failing(&before, &after, "failing").len(), 1);
    // A leader that never renewed its first lease: renewals_total stays at
    // the zero it was registered with.
    assert_eq!(not_renewing(&before, &after, "failing").len(), 1);
    w.cluster.set_unavailable(false);
}

#[tokio::test(flavor = "current_thread")]
async fn a_lost_challenge_counts_from_zero() {
    registry();
    let w = World::new();
    let hooked = Arc::new(Hooked::new(w.cluster.transport()));
    let rival = w.transport();
    let (tx, mut rx) = krabka_coordination::events::channel();
    let scrapes = Arc::new(Mutex::new(Vec::new()));
    {
        let scrapes = Arc::clone(&scrapes);
        hooked.after_next_mint(move || {
            // After the member's registration and mint, before its lease:
            // the rival mints a newer epoch, so the member's challenge loses.
            scrapes.lock().unwrap().push(scrape());
            let _: FencingToken = rival.mint(ROLE).unwrap().token();
        });
    }
    let b = spawn_on(hooked.clone(), "challenger", w.options().with_events(tx));
    w.run_until(T0).await;
    assert!(!b.is_finished());
    assert!(names(&drain(&mut rx)).contains(&"lost_challenge"));
    let before = scrapes.lock().unwrap().pop().unwrap();
    let after = scrape();
    let name = "krabka_challenges_lost_total";
    assert_eq!(value(&before, name, "challenger"), Some(0.0));
    assert_eq!(value(&after, name, "challenger"), Some(1.0));
    assert_eq!(
        filter(increase(&before, &after, name, "challenger"), |x| x > 0.0).len(),
        1
    );
    b.abort();
}

/// `member` acquires `role` on `transport` with the world's options, in a task.
fn spawn_role(
    w: &World,
    transport: Arc<dyn Transport>,
    role: &'static str,
    member: &'static str,
) -> tokio::task::JoinHandle<krabka_coordination::Result<krabka_coordination::leadership::Leadership>>
{
    let options = w.options();
    tokio::spawn(async move { acquire_leadership(transport, role, member, options).await })
}

#[tokio::test(flavor = "current_thread")]
async fn role_without_leader_fires_when_the_only_holder_is_fenced() {
    const ROLE_ALONE: &str = "alerts-role-without-leader";
    registry();
    let w = World::new();
    let a = spawn_role(&w, w.transport(), ROLE_ALONE, "alone");
    w.run_until(T0).await;
    let _a = leader(a).await;
    let before = scrape();
    assert_eq!(value(&before, "krabka_role_held", "alone"), Some(1.0));
    assert_eq!(role_without_leader(&before, ROLE_ALONE), None);
    let _newer = w
        .transport()
        .acquire_epoch(ROLE_ALONE, LEASE)
        .await
        .unwrap();
    w.run_until(T0 + ms(RENEW)).await;
    let after = scrape();
    assert_eq!(value(&after, "krabka_fences_total", "alone"), Some(1.0));
    // The fenced holder's series stays, at 0: the sum is 0, not absent.
    assert_eq!(role_without_leader(&after, ROLE_ALONE), Some(0.0));
}

#[tokio::test(flavor = "current_thread")]
async fn renewals_slow_fires_on_the_first_slow_renewal() {
    const ROLE_SLOW: &str = "alerts-renewals-slow";
    registry();
    let w = World::new();
    let hooked = Arc::new(Hooked::new(w.cluster.transport()));
    let a = spawn_role(&w, hooked.clone(), ROLE_SLOW, "slow");
    w.run_until(T0).await;
    let a = leader(a).await;
    let before = scrape();
    // The role's buckets are there, empty, from the registration.
    let inf = by_role(&before, "krabka_renewal_seconds_bucket", ROLE_SLOW);
    assert_eq!(inf.len(), 16, "{inf:?}");
    assert!(inf.values().all(|&n| n == 0.0), "{inf:?}");
    // The first renewal (at RENEW) takes 7 s, within the lease.
    hooked.set_overrunning(true);
    w.run_until(T0 + ms(RENEW) + 7_000).await;
    hooked.set_overrunning(false);
    let mut after = scrape();
    for _ in 0..100 {
        if value(&after, "krabka_renewals_total", "slow") == Some(1.0) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        settle().await;
        after = scrape();
    }
    assert!(a.is_held());
    assert_eq!(value(&after, "krabka_renewals_total", "slow"), Some(1.0));
    let p99 = quantile(&before, &after, 0.99, "krabka_renewal_seconds", ROLE_SLOW);
    assert!(p99.is_some_and(|q| q > 5.0), "{p99:?}");
}
