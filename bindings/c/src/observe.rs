//! `krabka_observer`: the core's observer (`Client::observe`), through the
//! shared crate's [`ObserverHandle`], delivering each view to a C callback
//! on a thread the library starts for the observer (`krabka-observe`).
//!
//! The thread waits for the next view on the runtime (a plain thread may
//! block on it) and calls the callback with a `krabka_role_view` made for
//! the call, so a callback never runs on a runtime thread: it may block
//! (views wait in the observer meanwhile, none is lost) and may call any
//! function of the library.

use std::ffi::{c_char, c_void, CString};
use std::sync::Mutex;
use std::thread::{JoinHandle, ThreadId};

use krabka_coordination::observe::{Change, RoleView};
use krabka_coordination_bindings::{ObserverHandle, ProcessBound};

use crate::client::{krabka_client, krabka_roster_entry};
use crate::codec::{krabka_fencing_token, krabka_lease_fields, lease_fields};
use crate::ffi::{
    cstr, free_handle, guard, guard_value, input, into_handle, krabka_error, krabka_result, output,
    Failure,
};
use crate::runtime::block;

/// Why a view was reported. The values never change meaning; the core may
/// add changes, which arrive as `KRABKA_CHANGE_OTHER` with their name in
/// `krabka_role_view.change_name`.
#[allow(non_camel_case_types)]
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum krabka_change {
    /// A change newer than this library (see `change_name`).
    Other = 0,
    /// `initial`: the first view of the role, once its partition's
    /// committed records were read.
    Initial = 1,
    /// `elected`: a lease names a leader (member and token) the last view
    /// did not: a new term, or a term back after its lease lapsed.
    Elected = 2,
    /// `renewed`: the leader renewed (only when observing with renewals).
    Renewed = 3,
    /// `cleared`: a tombstone cleared the lease: the leader resigned.
    Cleared = 4,
    /// `lapsed`: the lease deadline passed without a renewal (observer's
    /// clock, complete view): `lapsed` holds the lease, there is no leader.
    Lapsed = 5,
    /// `roster`: members registered or left; the leader did not change.
    Roster = 6,
}

/// The changes and the core's names for them.
const CHANGES: [(krabka_change, Change); 6] = [
    (krabka_change::Initial, Change::Initial),
    (krabka_change::Elected, Change::Elected),
    (krabka_change::Renewed, Change::Renewed),
    (krabka_change::Cleared, Change::Cleared),
    (krabka_change::Lapsed, Change::Lapsed),
    (krabka_change::Roster, Change::Roster),
];

/// The core's stable name of a change (`"elected"`), NUL-terminated and
/// static; `"other"` for `KRABKA_CHANGE_OTHER` and a value this library
/// does not know. Does not block; any thread.
#[no_mangle]
pub extern "C" fn krabka_change_name(change: u32) -> *const c_char {
    guard_value(c"other".as_ptr(), || {
        CHANGES
            .iter()
            .find(|(c, _)| *c as u32 == change)
            .map_or(c"other".as_ptr(), |(_, c)| name_of(*c).as_ptr())
    })
}

fn name_of(change: Change) -> &'static std::ffi::CStr {
    match change {
        Change::Initial => c"initial",
        Change::Elected => c"elected",
        Change::Renewed => c"renewed",
        Change::Cleared => c"cleared",
        Change::Lapsed => c"lapsed",
        Change::Roster => c"roster",
        _ => c"other",
    }
}

/// One role as an observer saw it, as the view callback gets it. Every
/// pointer in it (the strings, the leases' members, the roster) is valid
/// only during the callback: copy what you keep. A lease's `member` and a
/// roster entry's `member` are UTF-8 of their `member_len` bytes, not
/// NUL-terminated (as in `krabka_role_state`); `role` and `change_name` are
/// NUL-terminated.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug)]
pub struct krabka_role_view {
    /// The role.
    pub role: *const c_char,
    /// The partition of the state topic that holds it.
    pub partition: i32,
    /// Why this view was reported.
    pub change: krabka_change,
    /// The core's stable name of the change (`"elected"`).
    pub change_name: *const c_char,
    /// True when the view names a leader (`leader` is then set): false when
    /// there is no lease yet, it was cleared, or it lapsed.
    pub has_leader: bool,
    /// The leader's lease (when `has_leader`; zeroes otherwise).
    pub leader: krabka_lease_fields,
    /// True when the view has no leader because the lease in `lapsed`
    /// passed its deadline without a renewal (until the role's next lease
    /// record).
    pub has_lapsed: bool,
    /// The lapsed lease (when `has_lapsed`; zeroes otherwise).
    pub lapsed: krabka_lease_fields,
    /// The roster in rank order (`roster[i].rank == i`), or NULL when it is
    /// empty.
    pub roster: *const krabka_roster_entry,
    /// The number of roster entries.
    pub roster_len: usize,
    /// The offset the view was read up to (every record of the partition
    /// below it was read).
    pub position: i64,
    /// When the view was taken, in epoch milliseconds of the observer's clock.
    pub at: i64,
}

/// The view callback: called with each view (valid during the call) and
/// the `user_data` given to `krabka_client_observe`.
#[allow(non_camel_case_types)]
pub type krabka_view_callback =
    Option<unsafe extern "C" fn(view: *const krabka_role_view, user_data: *mut c_void)>;

/// The end callback: called at most once, after the last view, when the
/// observer ended with an error: its code (`KRABKA_RESULT_FATAL`, ...),
/// its message (NUL-terminated, valid during the call) and `user_data`.
#[allow(non_camel_case_types)]
pub type krabka_observer_error_callback = Option<
    unsafe extern "C" fn(error: krabka_result, message: *const c_char, user_data: *mut c_void),
>;

/// A watch of roles (opaque), from `krabka_client_observe`; stopped by
/// `krabka_observer_close`, freed by `krabka_observer_free`.
///
/// Thread safety: `krabka_observer_close` may be called from any number of
/// threads at once, and from the observer's own callbacks.
/// `krabka_observer_free` must not race with another call on the observer.
/// An observer belongs to the process that made it: in a forked child its
/// functions do nothing and freeing it leaks it.
#[allow(non_camel_case_types)]
pub struct krabka_observer {
    inner: ProcessBound<ObserverHandle>,
    thread: Mutex<Option<JoinHandle<()>>>,
    thread_id: ThreadId,
}

impl Drop for krabka_observer {
    fn drop(&mut self) {
        let thread = self
            .thread
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let Ok(handle) = self.inner.get() else {
            // A forked child has no such thread: leak it.
            std::mem::forget(thread);
            return;
        };
        handle.close();
        if std::thread::current().id() == self.thread_id {
            // Freed from a callback: the thread ends when it returns.
            return;
        }
        if let Some(t) = thread {
            let _ = t.join();
        }
    }
}

/// Text for C: interior NUL bytes (never in a role the core took) are
/// dropped rather than cutting the string.
fn c_text(s: &str) -> CString {
    CString::new(s.replace('\0', "")).unwrap_or_default()
}

const NO_LEASE: krabka_lease_fields = krabka_lease_fields {
    member: std::ptr::null(),
    member_len: 0,
    token: krabka_fencing_token {
        producer_id: 0,
        producer_epoch: 0,
    },
    granted_at: 0,
    deadline: 0,
};

/// Calls `callback` with `view`, made into a `krabka_role_view` for the call.
fn deliver(
    callback: unsafe extern "C" fn(*const krabka_role_view, *mut c_void),
    user: *mut c_void,
    view: &RoleView,
) {
    let role = c_text(&view.role);
    let change = CHANGES
        .iter()
        .find(|(_, c)| *c == view.change)
        .map_or(krabka_change::Other, |(k, _)| *k);
    let change_name = c_text(view.change.name());
    let roster: Vec<krabka_roster_entry> = view
        .roster
        .iter()
        .enumerate()
        .map(|(rank, e)| krabka_roster_entry {
            member: e.member.as_ptr().cast(),
            member_len: e.member.len(),
            rank: rank as u64,
            offset: e.offset,
            registered_at: e.registered_at,
        })
        .collect();
    let v = krabka_role_view {
        role: role.as_ptr(),
        partition: view.partition,
        change,
        change_name: change_name.as_ptr(),
        has_leader: view.leader.is_some(),
        leader: view.leader.as_ref().map_or(NO_LEASE, lease_fields),
        has_lapsed: view.lapsed.is_some(),
        lapsed: view.lapsed.as_ref().map_or(NO_LEASE, lease_fields),
        roster: if roster.is_empty() {
            std::ptr::null()
        } else {
            roster.as_ptr()
        },
        roster_len: roster.len(),
        position: view.position,
        at: view.at,
    };
    // SAFETY: the caller's callback, with a view valid for the call.
    unsafe { callback(&v, user) };
}

/// The caller's `user_data`, handed to the observer's thread. The header
/// makes the caller promise it may be used there.
struct UserData(*mut c_void);

// SAFETY: the documented contract of `krabka_client_observe`: `user_data`
// is used by the callbacks on the observer's thread.
unsafe impl Send for UserData {}

/// Watches `n_roles` roles (`roles[i]`, NUL-terminated UTF-8, borrowed for
/// the call; a role given twice is watched once) without joining them,
/// through `client`'s state reader: nothing is written, no rank is taken.
/// `renewals` reports each renewal too (`KRABKA_CHANGE_RENEWED`). No role,
/// or a role the record layout cannot hold, is
/// `KRABKA_RESULT_INVALID_ARGUMENT`, before any read. `on_view` is
/// required; `on_error` may be NULL. On success `*out` is a new
/// `krabka_observer` the caller owns (free it with `krabka_observer_free`);
/// on failure it is NULL and no callback is ever called.
///
/// Per role, `on_view` first gets one `KRABKA_CHANGE_INITIAL` view once the
/// role's committed records are read, then a view at each change, in the
/// order of the records that made it (views of different roles
/// interleave). A view is a read, not a fence. An unreachable cluster is
/// retried (nothing new is reported meanwhile); an error that ends the
/// observer (a record of a watched role that does not decode, a state
/// topic missing or unreadable) goes to `on_error` once, after the last
/// view, and then nothing more is called.
///
/// Threads: both callbacks run on one thread the library starts for this
/// observer (named `krabka-observe`), never on the caller's thread, never
/// two at once, and never on a thread of the library's runtime: a callback
/// may block (later views wait, none is lost, but they come late) and may
/// call any function of the library, `krabka_observer_close` and
/// `krabka_observer_free` of its own observer included (free then returns
/// at once; the thread ends when the callback returns). `user_data` is
/// passed to every call as it is; the caller keeps it valid, and usable
/// from that thread, until `krabka_observer_free` returns.
///
/// Does not wait for Kafka (the reads start in the background); any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_client_observe(
    client: *const krabka_client,
    roles: *const *const c_char,
    n_roles: usize,
    renewals: bool,
    on_view: krabka_view_callback,
    on_error: krabka_observer_error_callback,
    user_data: *mut c_void,
    out: *mut *mut krabka_observer,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let out = unsafe { output(out, "out") }?;
        *out = std::ptr::null_mut();
        let client = unsafe { input(client, "client") }?.get()?;
        let on_view = on_view.ok_or_else(|| Failure::null("on_view"))?;
        let mut names = Vec::with_capacity(n_roles.min(1024));
        if n_roles > 0 {
            if roles.is_null() {
                return Err(Failure::null("roles"));
            }
            if n_roles > crate::ffi::MAX_LEN / std::mem::size_of::<*const c_char>() {
                return Err(Failure::core(&krabka_coordination::Error::InvalidArgument(
                    format!("n_roles must be the number of roles, got {n_roles}"),
                )));
            }
            for i in 0..n_roles {
                // SAFETY: `roles` holds `n_roles` pointers.
                let r = unsafe { *roles.add(i) };
                names.push(unsafe { cstr(r, &format!("roles[{i}]")) }?.to_owned());
            }
        }
        let handle = block(client.observe(names, renewals))?;
        let user = UserData(user_data);
        let next = handle.clone();
        let thread = std::thread::Builder::new()
            .name("krabka-observe".to_owned())
            .spawn(move || {
                let user = user;
                loop {
                    match block(next.next()) {
                        Ok(Some(view)) => {
                            // A panic while making the view must not unwind
                            // into the caller's callback or end silently.
                            let delivered =
                                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                    deliver(on_view, user.0, &view)
                                }));
                            if delivered.is_err() {
                                next.close();
                                break;
                            }
                        }
                        Ok(None) => break,
                        Err(f) => {
                            // Closed meanwhile: the caller asked for the end.
                            if next.is_closed() && f.code == krabka_result::Cancelled {
                                break;
                            }
                            if let Some(on_error) = on_error {
                                let message = c_text(&f.message);
                                // SAFETY: the caller's callback, with a
                                // message valid for the call.
                                unsafe { on_error(f.code, message.as_ptr(), user.0) };
                            }
                            break;
                        }
                    }
                }
            })
            .map_err(|e| {
                handle.close();
                Failure::new(
                    krabka_result::Fatal,
                    format!("cannot start the observer's callback thread: {e}"),
                )
            })?;
        let thread_id = thread.thread().id();
        *out = into_handle(krabka_observer {
            inner: ProcessBound::new("krabka_observer", handle, None),
            thread: Mutex::new(Some(thread)),
            thread_id,
        });
        Ok(())
    })
}

/// Stops the observer: no view is delivered after a callback in progress
/// returns (a close from inside a callback: after it returns), and
/// `on_error` is not called. Idempotent. Does not block (free waits for the
/// thread); any thread, the observer's callbacks included.
#[no_mangle]
pub unsafe extern "C" fn krabka_observer_close(observer: *const krabka_observer) -> krabka_result {
    guard(std::ptr::null_mut(), || {
        let o = unsafe { input(observer, "observer") }?;
        o.inner.get()?.close();
        Ok(())
    })
}

/// Frees an observer; NULL is a no-op. Closes it and waits until its
/// thread ended, so no callback runs once this returns and `user_data` may
/// be freed then; called from one of the observer's own callbacks it
/// returns at once instead, and the thread ends when that callback returns.
/// Must not race with another call on the observer.
#[no_mangle]
pub unsafe extern "C" fn krabka_observer_free(observer: *mut krabka_observer) {
    guard_value((), || unsafe { free_handle(observer) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_change_of_the_core_has_a_code_and_its_name() {
        for (i, (code, change)) in CHANGES.iter().enumerate() {
            assert_eq!(*code as usize, i + 1, "{change:?}");
            let name = unsafe { std::ffi::CStr::from_ptr(krabka_change_name(*code as u32)) };
            assert_eq!(name.to_str().unwrap(), change.name());
        }
        let other = unsafe { std::ffi::CStr::from_ptr(krabka_change_name(99)) };
        assert_eq!(other.to_str().unwrap(), "other");
    }
}
