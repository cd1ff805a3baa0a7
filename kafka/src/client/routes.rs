//! The client's cached routing decisions: which broker is the transaction
//! coordinator of each transactional id, and which broker to ask last when
//! looking one up again. Every entry carries the instant it was learned,
//! is used without a second look only while it is younger than
//! [`COORDINATOR_MAX_AGE`], and is dropped once it is older than
//! [`FORGET_AFTER`], so the caches hold the ids in use, not every id the
//! process ever touched.
//!
//! # Bound
//!
//! A sweep runs on an insert, at most once per [`COORDINATOR_MAX_AGE`], and
//! is one pass over the map dropping every entry older than
//! [`FORGET_AFTER`]. A map therefore holds at most the keys inserted within
//! [`FORGET_AFTER`] + [`COORDINATOR_MAX_AGE`] before its newest insert, and
//! an insert costs amortised constant work.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// How long a transaction coordinator named by FindCoordinator is used
/// before the next request asks FindCoordinator again, at the other
/// brokers first: a backstop for a coordinator cut off from its peers and
/// the controller, which goes on answering from memory. What rests on such
/// an answer does not wait for it: a describe is confirmed at another
/// broker before it is taken (the `confirm` module), and a lease writer's
/// requests need the coordinator to write `__transaction_state`, which a
/// cut-off broker cannot, so they fail and the coordinator is looked up
/// again. Each id in use costs one FindCoordinator per this age: with
/// 10,000 roles, about 170 a second, against the roughly 3,000 requests a
/// second of their renewals.
pub const COORDINATOR_MAX_AGE: Duration = Duration::from_secs(60);

/// How old an entry gets before a sweep drops it: twice
/// [`COORDINATOR_MAX_AGE`], so an id in use (asked about again each
/// [`COORDINATOR_MAX_AGE`]) keeps its entry, and its last known
/// coordinator stays the fallback of a second look that fails.
pub const FORGET_AFTER: Duration = Duration::from_secs(120);

/// A map from a key (a transactional id) to what was learned of it and
/// when, aged as the module docs say.
#[derive(Debug)]
pub(super) struct Aged<V> {
    map: HashMap<String, (Instant, V)>,
    /// When the map was last swept.
    swept: Instant,
}

impl<V> Aged<V> {
    /// An empty map.
    pub(super) fn new() -> Self {
        Aged {
            map: HashMap::new(),
            swept: Instant::now(),
        }
    }

    /// The entry of `key` and whether it is older than
    /// [`COORDINATOR_MAX_AGE`] at `now`. An aged entry is marked learned
    /// `now`, so that of many requests that find it aged, one looks again.
    pub(super) fn get_marking(&mut self, key: &str, now: Instant) -> Option<(&V, bool)> {
        let (learned, v) = self.map.get_mut(key)?;
        let aged = now.saturating_duration_since(*learned) >= COORDINATOR_MAX_AGE;
        if aged {
            *learned = now;
        }
        Some((&*v, aged))
    }

    /// Sets the entry of `key`, learned `now`; first sweeps the map when
    /// the last sweep is [`COORDINATOR_MAX_AGE`] old.
    pub(super) fn insert(&mut self, key: &str, v: V, now: Instant) {
        if now.saturating_duration_since(self.swept) >= COORDINATOR_MAX_AGE {
            self.map
                .retain(|_, (learned, _)| now.saturating_duration_since(*learned) < FORGET_AFTER);
            self.swept = now;
        }
        self.map.insert(key.to_owned(), (now, v));
    }

    /// Takes the entry of `key` out, if it is younger than
    /// [`FORGET_AFTER`] at `now`.
    pub(super) fn remove(&mut self, key: &str, now: Instant) -> Option<V> {
        let (learned, v) = self.map.remove(key)?;
        (now.saturating_duration_since(learned) < FORGET_AFTER).then_some(v)
    }

    /// The entry of `key`, however old, leaving it as it is.
    pub(super) fn peek(&self, key: &str) -> Option<&V> {
        self.map.get(key).map(|(_, v)| v)
    }

    /// How many entries the map holds.
    pub(super) fn len(&self) -> usize {
        self.map.len()
    }
}

/// The coordinator of a transactional id as FindCoordinator named it.
#[derive(Debug, Clone)]
pub(super) struct Route {
    /// The coordinator's address.
    pub(super) addr: String,
    /// The coordinator's node id.
    pub(super) node: i32,
    /// The bootstrap broker whose FindCoordinator named it.
    pub(super) named_by: String,
}

/// A coordinator or leader that refused or did not answer: the next lookup
/// asks it last and, when known, begins after the bootstrap broker that
/// named it (whose view may be what is stale).
#[derive(Debug, Clone)]
pub(super) struct Suspect {
    /// The broker that refused or did not answer.
    pub(super) addr: String,
    /// The bootstrap broker that named it, if known.
    pub(super) named_by: Option<String>,
}

/// Distrusts the coordinator at `addr` of `key` (a transactional id or a
/// consumer group), the one way both coordinator caches forget.
///
/// Contract: called when a request to the cached coordinator ends
/// moved (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, unreachable), gets
/// no answer, or answers CONCURRENT_TRANSACTIONS for too long. The entry of
/// `key` leaves `routes` whatever address it held, so the next request for
/// `key` asks FindCoordinator instead of using it; `addr` goes into
/// `suspects`, so that lookup asks `addr` last and, when the entry that
/// left was `addr`, begins after the bootstrap broker that named it (whose
/// view may be what is stale). Takes one lock, then the other, never both.
pub(super) fn distrust(
    routes: &Mutex<Aged<Route>>,
    suspects: &Mutex<Aged<Suspect>>,
    key: &str,
    addr: &str,
    now: Instant,
) {
    let named_by = routes
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(key, now)
        .filter(|r| r.addr == addr)
        .map(|r| r.named_by);
    let suspect = Suspect {
        addr: addr.to_owned(),
        named_by,
    };
    suspects
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, suspect, now);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_ages_and_is_marked_when_found_aged() {
        let t0 = Instant::now();
        let mut m = Aged::new();
        m.insert("a", 1, t0);
        assert_eq!(
            m.get_marking("a", t0 + Duration::from_secs(1)),
            Some((&1, false))
        );
        assert_eq!(
            m.get_marking("a", t0 + COORDINATOR_MAX_AGE),
            Some((&1, true))
        );
        // Marked: the next request within the age uses it as it is.
        assert_eq!(
            m.get_marking("a", t0 + COORDINATOR_MAX_AGE),
            Some((&1, false))
        );
        assert_eq!(m.remove("a", t0 + COORDINATOR_MAX_AGE), Some(1));
        assert_eq!(m.get_marking("a", t0), None);
    }

    #[test]
    fn a_removed_entry_older_than_the_limit_is_nothing() {
        let t0 = Instant::now();
        let mut m = Aged::new();
        m.insert("a", 1, t0);
        assert_eq!(m.remove("a", t0 + FORGET_AFTER), None);
    }

    /// Ten thousand ids looked up once each and never again: the map holds
    /// the ids of the last [`FORGET_AFTER`] + [`COORDINATOR_MAX_AGE`], not
    /// every id ever inserted.
    #[test]
    fn the_map_stays_bounded_as_ids_age_out() {
        let t0 = Instant::now();
        let mut m = Aged::new();
        let step = Duration::from_millis(10);
        let window = (FORGET_AFTER + COORDINATOR_MAX_AGE).as_millis() / step.as_millis();
        let mut largest = 0;
        for i in 0..10_000u32 {
            m.insert(&format!("role-{i}"), i, t0 + step * i);
            largest = largest.max(m.len());
        }
        assert!(largest as u128 <= window + 1, "{largest} entries");
        assert!(
            largest >= 1_000,
            "entries younger than the limit stay: {largest}"
        );
    }

    /// Both coordinator caches of a client, the transactional ids' and the
    /// consumer groups', forget a distrusted coordinator and note it
    /// suspect with the broker that named it; one naming another address
    /// goes too, suspected without a namer.
    #[tokio::test]
    async fn both_coordinator_caches_forget_a_distrusted_coordinator() {
        let client = crate::Client::new(&crate::Settings::new("127.0.0.1:9")).unwrap();
        let inner = &client.inner;
        let route = |addr: &str| Route {
            addr: addr.to_owned(),
            node: 1,
            named_by: "b:2".to_owned(),
        };
        let now = Instant::now();
        for (id, cached) in [("x", "a:1"), ("y", "c:3")] {
            inner
                .coordinators
                .lock()
                .unwrap()
                .insert(id, route(cached), now);
            inner
                .group_coordinators
                .lock()
                .unwrap()
                .insert(id, route(cached), now);
            client.distrust_coordinator(id, "a:1");
            client.distrust_group_coordinator(id, "a:1");
        }
        assert_eq!(client.coordinators_cached(), 0, "transaction coordinators");
        assert_eq!(client.group_coordinators_cached(), 0, "group coordinators");
        for suspects in [&inner.suspect, &inner.group_suspect] {
            let mut suspects = suspects.lock().unwrap();
            let x = suspects.remove("x", now).expect("x suspected");
            assert_eq!(
                (x.addr.as_str(), x.named_by.as_deref()),
                ("a:1", Some("b:2"))
            );
            let y = suspects.remove("y", now).expect("y suspected");
            assert_eq!((y.addr.as_str(), y.named_by), ("a:1", None));
        }
    }
}
