//! The event callback: a member's events, from its registration to the end
//! of its term, delivered in order on one thread the library starts for the
//! acquire.
//!
//! A task on the runtime reads the shared crate's [`AcquireEventStream`]
//! (its feed given to the acquire before it registers; the leadership
//! attached once won), which ends with the term or after a failed acquire.
//! It hands each event to a plain thread
//! (`krabka-events`) that calls the C callback: a callback never runs on a
//! runtime thread, so it may block and may call any function of the
//! library (even `krabka_leadership_free` of its own leadership).

use std::ffi::{c_char, c_void, CString};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::{JoinHandle, ThreadId};

use krabka_coordination::events::Event;
use krabka_coordination::leadership::Leadership;
use krabka_coordination_bindings::{AcquireEventStream, AcquireOutcome, EventView};
use tokio_util::sync::CancellationToken;

use crate::codec::krabka_fencing_token;
use crate::ffi::{krabka_result, Failure};

/// What happened to a member. The values never change meaning; the core
/// may add kinds, which arrive as `KRABKA_EVENT_KIND_OTHER` with their name
/// in `krabka_event.name`.
#[allow(non_camel_case_types)]
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum krabka_event_kind {
    /// A kind newer than this library (see `name`).
    Other = 0,
    /// `registered`: the registration record was appended (`partition`, `offset`).
    Registered = 1,
    /// `waiting`: the member waits for its turn (`rank`, `challenge_at`;
    /// behind a lease, `holder` and `token`).
    Waiting = 2,
    /// `held_back`: an open transaction holds the partition back.
    HeldBack = 3,
    /// `challenging`: the member's turn came; it mints the epoch.
    Challenging = 4,
    /// `lost_challenge`: another member minted a newer epoch first (`token`).
    LostChallenge = 5,
    /// `elected`: the member leads (`token`, `granted_at`, `deadline`).
    Elected = 6,
    /// `renewed`: a renewal committed (`deadline`).
    Renewed = 7,
    /// `renewal_failing`: a renewal failed and is retried (`failures`, `error`).
    RenewalFailing = 8,
    /// `write_resolved`: an earlier OUTCOME_UNKNOWN write was resolved.
    WriteResolved = 9,
    /// `fenced`: a newer epoch took the role (`error`). Ends the term.
    Fenced = 10,
    /// `lease_expired`: no renewal committed within the lease. Ends the term.
    LeaseExpired = 11,
    /// `ended`: the term ended for another reason (`error`). Ends the term.
    Ended = 12,
    /// `resigned`: the member resigned (`cleared`).
    Resigned = 13,
    /// `deregistered`: the registration was removed.
    Deregistered = 14,
    /// `retrying`: a step failed and is tried again (`what`, `attempt`,
    /// `retry_in`, `error`).
    Retrying = 15,
}

/// The kinds and the core's names for them.
const KINDS: [(krabka_event_kind, &str); 15] = [
    (krabka_event_kind::Registered, "registered"),
    (krabka_event_kind::Waiting, "waiting"),
    (krabka_event_kind::HeldBack, "held_back"),
    (krabka_event_kind::Challenging, "challenging"),
    (krabka_event_kind::LostChallenge, "lost_challenge"),
    (krabka_event_kind::Elected, "elected"),
    (krabka_event_kind::Renewed, "renewed"),
    (krabka_event_kind::RenewalFailing, "renewal_failing"),
    (krabka_event_kind::WriteResolved, "write_resolved"),
    (krabka_event_kind::Fenced, "fenced"),
    (krabka_event_kind::LeaseExpired, "lease_expired"),
    (krabka_event_kind::Ended, "ended"),
    (krabka_event_kind::Resigned, "resigned"),
    (krabka_event_kind::Deregistered, "deregistered"),
    (krabka_event_kind::Retrying, "retrying"),
];

/// One step of a member, as the callback sees it. Every pointer in it is
/// valid only during the callback: copy what you keep. Strings are
/// NUL-terminated UTF-8. A field the kind does not have is 0, false or NULL
/// (the kind's documentation lists its fields).
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug)]
pub struct krabka_event {
    /// What happened.
    pub kind: krabka_event_kind,
    /// The core's stable name of the kind (`"elected"`).
    pub name: *const c_char,
    /// The role.
    pub role: *const c_char,
    /// The member id.
    pub member: *const c_char,
    /// When the step was taken, in epoch milliseconds of the member's clock.
    pub at: i64,
    /// `registered`: the partition of the state topic.
    pub partition: i32,
    /// `registered`: the offset of the registration record.
    pub offset: i64,
    /// `waiting`: the member's place among the challengers (0 first).
    pub rank: u64,
    /// `waiting`: when the member challenges if nothing changes (epoch ms).
    pub challenge_at: i64,
    /// `elected`, `lost_challenge`: the member's token; `waiting` behind a
    /// lease: the token of the holder (`holder`).
    pub token: krabka_fencing_token,
    /// `elected`: when the lease was granted (epoch ms).
    pub granted_at: i64,
    /// `elected`, `renewed`: the lease deadline (epoch ms).
    pub deadline: i64,
    /// `renewal_failing`: how many renewals in a row have failed.
    pub failures: u32,
    /// `renewal_failing`, `retrying`, `fenced`, `ended`: the result code of
    /// the cause (`KRABKA_RESULT_OK` when the kind has none).
    pub error: krabka_result,
    /// The cause's message, or NULL.
    pub error_message: *const c_char,
    /// `resigned`: true when the lease was cleared (the hand-over is
    /// immediate), false when standbys wait for the deadline.
    pub cleared: bool,
    /// `retrying`: what failed (`"registering"`, ...), or NULL.
    pub what: *const c_char,
    /// `retrying`: how many times in a row it failed (1 at the first).
    pub attempt: u32,
    /// `retrying`: the pause before the next try, in seconds.
    pub retry_in: f64,
    /// `waiting` behind a lease: the member the lease names (it may have
    /// lapsed: `challenge_at` is then its deadline plus the stagger), or
    /// NULL.
    pub holder: *const c_char,
    /// `write_resolved`: true when the earlier write whose outcome was
    /// unknown committed (its records are visible), false when it did not
    /// (false for every other kind). The last field: added after the
    /// others, whose offsets did not move.
    pub committed: bool,
}

/// The event callback: called with each event (valid during the call) and
/// the `user_data` given to the acquire. See `krabka_client_acquire` for
/// the thread it runs on.
#[allow(non_camel_case_types)]
pub type krabka_event_callback =
    Option<unsafe extern "C" fn(event: *const krabka_event, user_data: *mut c_void)>;

/// Text for C: interior NUL bytes (never in a role or member the core took)
/// are dropped rather than cutting the string.
fn c_text(s: &str) -> CString {
    CString::new(s.replace('\0', "")).unwrap_or_default()
}

/// Calls `callback` with `event`, made into a `krabka_event` for the call.
fn deliver(
    callback: unsafe extern "C" fn(*const krabka_event, *mut c_void),
    user: *mut c_void,
    event: &Event,
) {
    let v = EventView::from(event);
    let kind = KINDS
        .iter()
        .find(|(_, n)| *n == v.kind)
        .map_or(krabka_event_kind::Other, |(k, _)| *k);
    let name = c_text(v.kind);
    let role = c_text(&v.role);
    let member = c_text(&v.member);
    let error = v.error.as_deref().map(Failure::core);
    let error_message = error.as_ref().map(|f| c_text(&f.message));
    let what = v.what.as_deref().map(c_text);
    let holder = v.holder.as_deref().map(c_text);
    let e = krabka_event {
        kind,
        name: name.as_ptr(),
        role: role.as_ptr(),
        member: member.as_ptr(),
        at: v.at,
        partition: v.partition.unwrap_or(0),
        offset: v.offset.unwrap_or(0),
        rank: v.rank.map_or(0, |r| r as u64),
        challenge_at: v.challenge_at.unwrap_or(0),
        token: v.token.map_or(
            krabka_fencing_token {
                producer_id: 0,
                producer_epoch: 0,
            },
            Into::into,
        ),
        granted_at: v.granted_at.unwrap_or(0),
        deadline: v.deadline.unwrap_or(0),
        failures: v.failures.unwrap_or(0),
        error: error.as_ref().map_or(krabka_result::Ok, |f| f.code),
        error_message: error_message
            .as_ref()
            .map_or(std::ptr::null(), |m| m.as_ptr()),
        cleared: v.cleared.unwrap_or(false),
        what: what.as_ref().map_or(std::ptr::null(), |w| w.as_ptr()),
        attempt: v.attempt.unwrap_or(0),
        retry_in: v.retry_in.map_or(0.0, |d| d.as_secs_f64()),
        holder: holder.as_ref().map_or(std::ptr::null(), |h| h.as_ptr()),
        committed: v.committed.unwrap_or(false),
    };
    // SAFETY: the caller's callback, with an event valid for the call.
    unsafe { callback(&e, user) };
}

/// The caller's `user_data`, handed to the callback thread. The header
/// makes the caller promise it may be used there.
struct UserData(*mut c_void);

// SAFETY: the documented contract of `krabka_client_acquire`: `user_data`
// is used by the callback on the callback thread.
unsafe impl Send for UserData {}

/// The callback of one acquire: its forwarding task and its thread.
pub struct Dispatch {
    stop: CancellationToken,
    handoff: Option<AcquireOutcome>,
    thread: Option<JoinHandle<()>>,
    thread_id: ThreadId,
}

impl Dispatch {
    /// Starts delivering the events of `stream` to `callback` on a new
    /// thread; `outcome` is the stream's, settled by [`Dispatch::acquired`].
    pub fn start(
        rt: &tokio::runtime::Runtime,
        stream: AcquireEventStream,
        outcome: AcquireOutcome,
        callback: unsafe extern "C" fn(*const krabka_event, *mut c_void),
        user_data: *mut c_void,
    ) -> Result<Dispatch, Failure> {
        let stop = CancellationToken::new();
        let (events_tx, events_rx) = mpsc::channel::<Event>();
        let user = UserData(user_data);
        let thread_stop = stop.clone();
        let thread = std::thread::Builder::new()
            .name("krabka-events".to_owned())
            .spawn(move || {
                let user = user;
                for event in events_rx {
                    if thread_stop.is_cancelled() {
                        break;
                    }
                    // A panic while making the event must not unwind into
                    // the caller's callback or kill the thread silently.
                    let delivered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        deliver(callback, user.0, &event)
                    }));
                    if delivered.is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| {
                Failure::new(
                    krabka_result::Fatal,
                    format!("cannot start the event callback thread: {e}"),
                )
            })?;
        let thread_id = thread.thread().id();
        rt.spawn(forward(stream, events_tx, stop.clone()));
        Ok(Dispatch {
            stop,
            handoff: Some(outcome),
            thread: Some(thread),
            thread_id,
        })
    }

    /// Tells the forwarding task how the acquire ended: with the leadership
    /// (events go on until its term ends) or without (the events of the
    /// attempt are delivered, then the thread ends).
    pub fn acquired(&mut self, leadership: Option<Arc<Leadership>>) {
        if let Some(h) = self.handoff.take() {
            match leadership {
                Some(l) => h.won(&l),
                None => h.failed(),
            }
        }
    }

    /// Waits until every event was delivered and the thread ended (after a
    /// failed acquire, whose events are all sent by then).
    pub fn finish(mut self) {
        self.acquired(None);
        self.join();
    }

    /// Stops delivering (no callback starts after this returns) and waits
    /// for a callback in progress, unless called from the callback thread.
    pub fn stop(mut self) {
        self.stop.cancel();
        self.acquired(None);
        self.join();
    }

    fn join(&mut self) {
        if std::thread::current().id() == self.thread_id {
            // Called from the callback: it ends after this callback returns.
            return;
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Forwards the stream's events to the callback thread until it ends.
async fn forward(mut stream: AcquireEventStream, tx: mpsc::Sender<Event>, stop: CancellationToken) {
    loop {
        tokio::select! {
            biased;
            _ = stop.cancelled() => return,
            event = stream.next() => match event {
                Some(e) => {
                    if tx.send(e).is_err() {
                        return;
                    }
                }
                None => return,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_the_core_has_a_code() {
        for (i, (kind, name)) in KINDS.iter().enumerate() {
            assert_eq!(*kind as usize, i + 1, "{name}");
        }
    }

    /// What the test callback saw: the kind and `committed`.
    static SEEN: std::sync::Mutex<Vec<(krabka_event_kind, bool)>> =
        std::sync::Mutex::new(Vec::new());

    unsafe extern "C" fn record(e: *const krabka_event, _user: *mut c_void) {
        let e = unsafe { &*e };
        SEEN.lock().unwrap().push((e.kind, e.committed));
    }

    #[test]
    fn write_resolved_carries_committed() {
        use krabka_coordination::events::EventKind;
        let event = |kind| Event {
            role: "r".into(),
            member: "m".into(),
            at: 1,
            kind,
        };
        deliver(
            record,
            std::ptr::null_mut(),
            &event(EventKind::WriteResolved { committed: true }),
        );
        deliver(
            record,
            std::ptr::null_mut(),
            &event(EventKind::WriteResolved { committed: false }),
        );
        deliver(
            record,
            std::ptr::null_mut(),
            &event(EventKind::Resigned { cleared: true }),
        );
        assert_eq!(
            *SEEN.lock().unwrap(),
            vec![
                (krabka_event_kind::WriteResolved, true),
                (krabka_event_kind::WriteResolved, false),
                (krabka_event_kind::Resigned, false),
            ]
        );
    }
}
