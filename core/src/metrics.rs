//! What every member records through the [`metrics`] facade crate.
//!
//! The core installs no recorder: a process that wants the numbers installs
//! one (`metrics::set_global_recorder`; the `krabka` CLI's `run
//! --metrics-addr` serves them in the Prometheus text format). Without a
//! recorder every call below is a no-op.
//!
//! | name | kind | labels | what |
//! |---|---|---|---|
//! | `krabka_role_held` | gauge | role, member | 1 while this member holds the role, 0 after |
//! | `krabka_elections_total` | counter | role, member | terms won |
//! | `krabka_challenges_lost_total` | counter | role, member | challenges lost to a newer epoch |
//! | `krabka_renewals_total` | counter | role, member | lease renewals committed |
//! | `krabka_renewal_failures_total` | counter | role, member | renewal attempts that failed (retried) |
//! | `krabka_fences_total` | counter | role, member | terms ended by a newer epoch |
//! | `krabka_lease_expirations_total` | counter | role, member | terms ended because no renewal committed within the lease |
//! | `krabka_resigns_total` | counter | role, member | terms resigned |
//! | `krabka_lease_left_seconds` | gauge | role, member | lease time left at the last election or renewal (wall clock) |
//! | `krabka_acquire_seconds` | histogram | role | from the start of an acquire to the election |
//! | `krabka_handover_seconds` | histogram | role | from the moment the member saw the role free (lease expired or resigned) to its first lease committed |
//! | `krabka_renewal_seconds` | histogram | role | each committed renewal, from its send to its commit |
//! | `krabka_describe_seconds` | histogram | (none) | each `describe_leadership` |
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
