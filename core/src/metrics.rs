//! What every member records through the [`metrics`] facade crate.
//!
//! The core installs no recorder: a process that wants the numbers installs
//! one (`metrics::set_global_recorder`; the `krabka` CLI's `run
//! --metrics-addr` serves them in the Prometheus text format). Without a
//! recorder every call below is a no-op.
//!
//! [`ALL`] lists every metric with its kind, labels and help text (the
//! table of docs/metrics.md). From a member's registration on, every series
//! of its role and member exists: the counters at zero, the gauges at their
//! value (0 until it leads) and the histograms empty, so an alert on
//! `increase(...) > 0` fires at the first event rather than at the series'
//! first appearance, and every metric's description is given to the
//! recorder (`describe_*`) for its `# HELP` line.
//!
//! Roles are labels: keep their number bounded, as with any label.

use std::time::Duration;

use crate::events::EventKind;

/// `krabka_role_held`.
pub const ROLE_HELD: &str = "krabka_role_held";
/// `krabka_elections_total`.
pub const ELECTIONS: &str = "krabka_elections_total";
/// `krabka_challenges_lost_total`.
pub const CHALLENGES_LOST: &str = "krabka_challenges_lost_total";
/// `krabka_renewals_total`.
pub const RENEWALS: &str = "krabka_renewals_total";
/// `krabka_renewal_failures_total`.
pub const RENEWAL_FAILURES: &str = "krabka_renewal_failures_total";
/// `krabka_fences_total`.
pub const FENCES: &str = "krabka_fences_total";
/// `krabka_lease_expirations_total`.
pub const LEASE_EXPIRATIONS: &str = "krabka_lease_expirations_total";
/// `krabka_resigns_total`.
pub const RESIGNS: &str = "krabka_resigns_total";
/// `krabka_lease_left_seconds`.
pub const LEASE_LEFT: &str = "krabka_lease_left_seconds";
/// `krabka_acquire_seconds`.
pub const ACQUIRE_SECONDS: &str = "krabka_acquire_seconds";
/// `krabka_handover_seconds`.
pub const HANDOVER_SECONDS: &str = "krabka_handover_seconds";
/// `krabka_renewal_seconds`.
pub const RENEWAL_SECONDS: &str = "krabka_renewal_seconds";
/// `krabka_describe_seconds`.
pub const DESCRIBE_SECONDS: &str = "krabka_describe_seconds";

/// What a metric is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetricKind {
    /// A count that only goes up.
    Counter,
    /// A value that goes up and down.
    Gauge,
    /// Observed durations, in seconds.
    Histogram,
}

/// One metric the core records: its name, kind, the labels of its series
/// (in the order recorded) and its help text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricInfo {
    /// The metric's name, e.g. `krabka_fences_total`.
    pub name: &'static str,
    /// Counter, gauge or histogram.
    pub kind: MetricKind,
    /// The labels of each series: `role` and `member`, `role`, or none.
    pub labels: &'static [&'static str],
    /// What the metric counts (one line, the `# HELP` text).
    pub help: &'static str,
}

const MEMBER: &[&str] = &["role", "member"];
const ROLE: &[&str] = &["role"];

const fn info(
    name: &'static str,
    kind: MetricKind,
    labels: &'static [&'static str],
    help: &'static str,
) -> MetricInfo {
    MetricInfo {
        name,
        kind,
        labels,
        help,
    }
}

/// Every metric the core records, in order of name.
pub const ALL: [MetricInfo; 13] = {
    use MetricKind::{Counter, Gauge, Histogram};
    [
        info(ACQUIRE_SECONDS, Histogram, ROLE, "Seconds from the start of an acquire to the election."),
        info(CHALLENGES_LOST, Counter, MEMBER, "Challenges lost to a newer epoch."),
        info(DESCRIBE_SECONDS, Histogram, &[], "Seconds each describe_leadership took."),
        info(ELECTIONS, Counter, MEMBER, "Terms won."),
        info(FENCES, Counter, MEMBER, "Terms ended by a newer epoch."),
        info(HANDOVER_SECONDS, Histogram, ROLE, "Seconds from the moment the member saw the role free (lease expired or resigned) to its first lease committed."),
        info(LEASE_EXPIRATIONS, Counter, MEMBER, "Terms ended because no renewal committed within the lease."),
        info(LEASE_LEFT, Gauge, MEMBER, "Lease seconds left at the last election or renewal (wall clock); 0 when not held."),
        info(RENEWAL_FAILURES, Counter, MEMBER, "Renewal attempts that failed (and were retried)."),
        info(RENEWAL_SECONDS, Histogram, ROLE, "Seconds each committed renewal took, from its send to its commit."),
        info(RENEWALS, Counter, MEMBER, "Lease renewals committed."),
        info(RESIGNS, Counter, MEMBER, "Terms resigned."),
        info(ROLE_HELD, Gauge, MEMBER, "1 while this member holds the role, 0 otherwise."),
    ]
};

/// The entry of [`ALL`] named `name`, if the core records it.
pub fn info_of(name: &str) -> Option<&'static MetricInfo> {
    ALL.iter().find(|m| m.name == name)
}

/// Gives the current recorder the description of every metric of [`ALL`]
/// (its `# HELP` text; durations in seconds). Idempotent; a no-op without
/// a recorder. Called at every member's registration.
pub fn describe_all() {
    for m in &ALL {
        match m.kind {
            MetricKind::Counter => metrics::describe_counter!(m.name, m.help),
            MetricKind::Gauge if m.name == LEASE_LEFT => {
                metrics::describe_gauge!(m.name, metrics::Unit::Seconds, m.help)
            }
            MetricKind::Gauge => metrics::describe_gauge!(m.name, m.help),
            MetricKind::Histogram => {
                metrics::describe_histogram!(m.name, metrics::Unit::Seconds, m.help)
            }
        }
    }
}

/// Makes every series of `role`/`member` exist without changing a value:
/// the counters at zero (or their count), the gauges at their value (zero
/// when new), the role's histograms (empty when new).
fn register_series(role: &str, member: &str) {
    describe_all();
    for m in &ALL {
        let labels: Vec<(&'static str, String)> = m
            .labels
            .iter()
            .map(|&k| (k, if k == "role" { role } else { member }.to_owned()))
            .collect();
        let labels = labels.as_slice();
        match m.kind {
            MetricKind::Counter => metrics::counter!(m.name, labels).increment(0),
            MetricKind::Gauge => metrics::gauge!(m.name, labels).increment(0.0),
            MetricKind::Histogram => drop(metrics::histogram!(m.name, labels)),
        }
    }
}

/// Timings of one member that an event alone does not carry (milliseconds
/// of the member's boot clock, [`crate::Clock::boot_millis`]).
#[derive(Debug, Default)]
pub(crate) struct Timings {
    /// When the acquire started.
    pub(crate) started: i64,
    /// When the member last started a challenge.
    pub(crate) challenging: std::sync::Mutex<Option<i64>>,
}

/// Records what `kind` means for the numbers of `role`/`member`. `mono` is
/// the member's boot clock ([`crate::Clock::boot_millis`]) and `wall` its
/// wall clock (ms) at the event.
pub(crate) fn on_event(
    role: &str,
    member: &str,
    kind: &EventKind,
    timings: &Timings,
    mono: i64,
    wall: i64,
) {
    let labels = [("role", role.to_owned()), ("member", member.to_owned())];
    let seconds = |ms: i64| Duration::from_millis(ms.max(0) as u64).as_secs_f64();
    match kind {
        EventKind::Registered { .. } => register_series(role, member),
        EventKind::Challenging => {
            *timings
                .challenging
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = Some(mono);
        }
        EventKind::Elected { deadline, .. } => {
            metrics::counter!(ELECTIONS, &labels).increment(1);
            metrics::gauge!(ROLE_HELD, &labels).set(1.0);
            metrics::gauge!(LEASE_LEFT, &labels).set(seconds(deadline - wall));
            let role_label = [("role", role.to_owned())];
            metrics::histogram!(ACQUIRE_SECONDS, &role_label)
                .record(seconds(mono - timings.started));
            let challenged = timings
                .challenging
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            if let Some(at) = challenged {
                metrics::histogram!(HANDOVER_SECONDS, &role_label).record(seconds(mono - at));
            }
        }
        EventKind::LostChallenge { .. } => {
            metrics::counter!(CHALLENGES_LOST, &labels).increment(1);
        }
        EventKind::Renewed { deadline } => {
            metrics::counter!(RENEWALS, &labels).increment(1);
            metrics::gauge!(LEASE_LEFT, &labels).set(seconds(deadline - wall));
        }
        EventKind::RenewalFailing { .. } => {
            metrics::counter!(RENEWAL_FAILURES, &labels).increment(1);
        }
        EventKind::Fenced { .. } => {
            metrics::counter!(FENCES, &labels).increment(1);
            ended(&labels);
        }
        EventKind::LeaseExpired => {
            metrics::counter!(LEASE_EXPIRATIONS, &labels).increment(1);
            ended(&labels);
        }
        EventKind::Resigned { .. } => {
            metrics::counter!(RESIGNS, &labels).increment(1);
            ended(&labels);
        }
        EventKind::Ended { .. } => ended(&labels),
        _ => {}
    }
}

fn ended(labels: &[(&'static str, String); 2]) {
    metrics::gauge!(ROLE_HELD, labels).set(0.0);
    metrics::gauge!(LEASE_LEFT, labels).set(0.0);
}

/// Records one committed renewal that took `took`.
pub(crate) fn renewal(role: &str, took: Duration) {
    metrics::histogram!(RENEWAL_SECONDS, "role" => role.to_owned()).record(took.as_secs_f64());
}

/// Records one `describe_leadership` that took `took`.
pub(crate) fn describe(took: Duration) {
    metrics::histogram!(DESCRIBE_SECONDS).record(took.as_secs_f64());
}
