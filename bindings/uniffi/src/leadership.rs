//! [`Leadership`]: the held leadership of a role, the core's handle, and
//! the values describe returns.
//!
//! Guarded writes and resign run on the binding's runtime and run to their
//! end once started: a transaction is never abandoned open. Dropping the
//! handle (Kotlin's `close()` and `use { }`, Swift's last reference)
//! resigns a role still held, as Python's `with` does, so a standby takes
//! over at once instead of one lease later: the drop waits for the resign,
//! at most the lease left plus [`RESIGN_SLACK`] (not at all on a thread of
//! an async runtime, where it is sent and not waited for).

use std::sync::Arc;

use krabka_coordination::leadership as core;
use krabka_coordination::transport::OutRecord as CoreRecord;
use krabka_coordination_bindings::ProcessBound;

use crate::codec::{FencingToken, Lease, RosterEntry};
use crate::error::{ErrorKind, KrabkaError};
use crate::events::EventStream;
use crate::runtime::{run, runtime};

/// A record header (Kafka allows a name more than once).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Header {
    /// The header's name.
    pub name: String,
    /// The header's value.
    pub value: Vec<u8>,
}

/// One record of a guarded write.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct OutRecord {
    /// The topic (never the state topic).
    pub topic: String,
    /// The record value (`null`/`nil`: a tombstone).
    pub value: Option<Vec<u8>>,
    /// The record key.
    #[uniffi(default = None)]
    pub key: Option<Vec<u8>>,
    /// The partition; left out, the producer's partitioner chooses.
    #[uniffi(default = None)]
    pub partition: Option<i32>,
    /// The record headers.
    #[uniffi(default = [])]
    pub headers: Vec<Header>,
}

impl From<OutRecord> for CoreRecord {
    fn from(r: OutRecord) -> Self {
        CoreRecord {
            topic: r.topic,
            partition: r.partition,
            key: r.key,
            value: r.value,
            headers: r.headers.into_iter().map(|h| (h.name, h.value)).collect(),
        }
    }
}

/// Why a term ended: the kind of the core's reason and its message.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct TermEnd {
    /// The kind: `Fenced`, `Resigned`, `LeaseExpired`, `Fatal`...
    pub kind: ErrorKind,
    /// The core's message.
    pub message: String,
    /// The reason as the error the bindings raise for it.
    pub error: KrabkaError,
}

impl TermEnd {
    fn of(reason: &krabka_coordination::Error) -> TermEnd {
        let error = KrabkaError::from(reason);
        TermEnd {
            kind: error.kind(),
            message: error.to_string(),
            error,
        }
    }
}

/// The roster and the lease of a role.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct RoleState {
    /// The role.
    pub role: String,
    /// The partition of the state topic that holds it.
    pub partition: i32,
    /// The roster in rank order (the rank is the index).
    pub roster: Vec<RosterEntry>,
    /// The current lease, if any.
    pub lease: Option<Lease>,
}

impl From<core::RoleStateReport> for RoleState {
    fn from(r: core::RoleStateReport) -> Self {
        RoleState {
            role: r.role,
            partition: r.partition,
            roster: r.roster.into_iter().map(Into::into).collect(),
            lease: r.lease.map(Into::into),
        }
    }
}

/// The role's current token at its transaction coordinator, as describe
/// found it.
#[derive(Debug, uniffi::Object)]
pub struct LeadershipStatus {
    pub(crate) inner: core::LeadershipStatus,
}

impl From<core::LeadershipStatus> for LeadershipStatus {
    fn from(inner: core::LeadershipStatus) -> Self {
        LeadershipStatus { inner }
    }
}

#[uniffi::export]
impl LeadershipStatus {
    /// The newest token minted for the role, or `NO_EPOCH` when no member
    /// has taken it.
    pub fn token(&self) -> FencingToken {
        self.inner.token.into()
    }

    /// True when `token` is the role's current token (the core's rule:
    /// equality, and `NO_EPOCH` never): a writer holding it was
    /// authoritative when the coordinator answered.
    pub fn authoritative(&self, token: FencingToken) -> bool {
        self.inner.authoritative(&token.into())
    }
}

/// The held leadership of a role (see the module documentation).
#[derive(uniffi::Object)]
pub struct Leadership {
    inner: ProcessBound<Arc<core::Leadership>>,
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership").finish_non_exhaustive()
    }
}

/// What a drop waits for a resign beyond the lease left (the resign's own
/// bound is the lease; this covers the tombstone's acknowledgement).
pub const RESIGN_SLACK: std::time::Duration = std::time::Duration::from_secs(1);

impl Drop for Leadership {
    /// Resigns a role still held (see the module docs).
    fn drop(&mut self) {
        let Ok(l) = self.inner.get() else {
            // Another process's: ProcessBound leaks it.
            return;
        };
        if !l.is_held() {
            return;
        }
        let Ok(rt) = runtime() else {
            return;
        };
        let (l, bound) = (Arc::clone(l), l.lease_left() + RESIGN_SLACK);
        let (tx, rx) = std::sync::mpsc::channel();
        rt.spawn(async move {
            let _ = tx.send(l.resign().await);
        });
        if tokio::runtime::Handle::try_current().is_ok() {
            // A thread of an async runtime: waiting would block it.
            return;
        }
        match rx.recv_timeout(bound) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "resigning a leadership on close failed; the lease runs out")
            }
            Err(_) => tracing::warn!(
                ?bound,
                "resigning a leadership on close did not end in time; the lease runs out"
            ),
        }
    }
}

impl Leadership {
    /// Wraps a leadership just won; it is dropped inside the runtime.
    pub(crate) fn new(l: Arc<core::Leadership>) -> Result<Leadership, KrabkaError> {
        let handle = runtime()?.handle().clone();
        Ok(Leadership {
            inner: ProcessBound::new("Leadership", l, Some(handle)),
        })
    }

    /// The core's leadership, unless this handle belongs to another process.
    pub(crate) fn core(&self) -> Result<&Arc<core::Leadership>, KrabkaError> {
        Ok(self.inner.get()?)
    }
}

#[uniffi::export]
impl Leadership {
    /// The fencing token of this term.
    pub fn token(&self) -> Result<FencingToken, KrabkaError> {
        Ok(self.core()?.token().into())
    }

    /// The role.
    pub fn role(&self) -> Result<String, KrabkaError> {
        Ok(self.core()?.role().to_owned())
    }

    /// The member id.
    pub fn member(&self) -> Result<String, KrabkaError> {
        Ok(self.core()?.member().to_owned())
    }

    /// The partition of the state topic that holds the role.
    pub fn partition(&self) -> Result<i32, KrabkaError> {
        Ok(self.core()?.partition())
    }

    /// The last lease this member wrote.
    pub fn lease(&self) -> Result<Lease, KrabkaError> {
        Ok(self.core()?.lease().into())
    }

    /// The lease time left on this member's monotonic clock, in seconds
    /// (zero once the term ended).
    pub fn lease_left(&self) -> Result<f64, KrabkaError> {
        Ok(self.core()?.lease_left().as_secs_f64())
    }

    /// How many renewals in a row have failed with a transient error.
    pub fn renewal_failures(&self) -> Result<i32, KrabkaError> {
        Ok(crate::events::saturating_i32(
            self.core()?.renewal_failures(),
        ))
    }

    /// True until the term ends.
    pub fn is_held(&self) -> Result<bool, KrabkaError> {
        Ok(self.core()?.is_held())
    }

    /// Why the term ended, or nothing while it is held.
    pub fn ended(&self) -> Result<Option<TermEnd>, KrabkaError> {
        Ok(self.core()?.err().map(|r| TermEnd::of(&r)))
    }

    /// Waits for the end of the term (fenced, resigned, lease expired, a
    /// fatal error) and says why.
    pub async fn wait(&self) -> Result<TermEnd, KrabkaError> {
        let l = Arc::clone(self.core()?);
        let done = l.done();
        run(async move {
            done.await;
            Ok(())
        })
        .await?;
        match l.err() {
            Some(reason) => Ok(TermEnd::of(&reason)),
            None => Err(KrabkaError::Fatal {
                detail: "the term ended without a reason".into(),
            }),
        }
    }

    /// Writes `records` in one transaction of this term's epoch. The broker
    /// fences a deposed leader's write: it fails with
    /// `KrabkaException.Fenced`, none of its records become visible, and the
    /// term ends.
    pub async fn write(&self, records: Vec<OutRecord>) -> Result<(), KrabkaError> {
        let l = Arc::clone(self.core()?);
        let records: Vec<CoreRecord> = records.into_iter().map(Into::into).collect();
        run(async move { l.write(records).await }).await
    }

    /// The member's events from now on, ending with the term.
    pub fn events(&self) -> Result<Arc<EventStream>, KrabkaError> {
        Ok(Arc::new(EventStream::subscribe(self.core()?)?))
    }

    /// Gives the role up: stops renewing, supersedes the token, clears the
    /// lease and deregisters. Idempotent.
    pub async fn resign(&self) -> Result<(), KrabkaError> {
        let l = Arc::clone(self.core()?);
        run(async move { l.resign().await }).await
    }
}
