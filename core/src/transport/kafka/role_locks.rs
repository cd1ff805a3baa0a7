//! One async lock per role, kept only while someone holds it or waits for
//! it ([`RoleLocks`]).
//!
//! A process may touch a role per job or per tenant; a map that kept a lock
//! for every role it ever touched would grow without end. Here a role's
//! entry goes when its last holder or waiter lets go.
//!
//! Invariant: an entry is removed only under the map's lock, and only when
//! the map's own reference to the lock is the only one. A reference outside
//! the map is made from the map under its lock, or cloned from another
//! reference outside it. So when the map's reference is the only one, no one
//! holds or waits on that lock and no one can start to, except through the
//! map: removing it never lets two holders of one role in at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex as StdMutex, MutexGuard};

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

type Lock = Arc<AsyncMutex<()>>;
type Map = Arc<StdMutex<HashMap<String, Lock>>>;

/// Mutual exclusion per role: a [`RoleLocks::lock`] of a role waits while
/// another guard of the same role is alive (waiters are served in order).
/// Clones share the locks.
#[derive(Clone, Default)]
pub(super) struct RoleLocks {
    map: Map,
}

impl RoleLocks {
    /// Waits until `role`'s lock is free, and holds it until the guard is
    /// dropped. A waiter dropped before its turn leaves nothing behind.
    pub(super) async fn lock(&self, role: &str) -> RoleGuard {
        let claim = self.claim(role);
        let lock = Arc::clone(claim.lock.as_ref().expect("set until dropped"));
        RoleGuard {
            _held: lock.lock_owned().await,
            _claim: claim,
        }
    }

    /// How many roles have an entry: those held or waited for.
    pub(super) fn len(&self) -> usize {
        lock_map(&self.map).len()
    }

    fn claim(&self, role: &str) -> Claim {
        let lock = Arc::clone(lock_map(&self.map).entry(role.to_owned()).or_default());
        Claim {
            map: Arc::clone(&self.map),
            role: role.to_owned(),
            lock: Some(lock),
        }
    }
}

/// Holds a role's lock (see [`RoleLocks::lock`]).
pub(super) struct RoleGuard {
    // Fields drop in declaration order: the lock is released (and its
    // reference let go) before the claim looks whether it was the last.
    _held: OwnedMutexGuard<()>,
    _claim: Claim,
}

/// A holder's or a waiter's reference to a role's lock; the last one to go
/// removes the role's entry.
struct Claim {
    map: Map,
    role: String,
    /// `Some` until dropped.
    lock: Option<Lock>,
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut map = lock_map(&self.map);
        drop(self.lock.take());
        // Whatever entry the role has now: if only the map refers to it,
        // no one holds or waits on it (the module's invariant).
        if map
            .get(&self.role)
            .is_some_and(|l| Arc::strong_count(l) == 1)
        {
            map.remove(&self.role);
        }
    }
}

fn lock_map(map: &StdMutex<HashMap<String, Lock>>) -> MutexGuard<'_, HashMap<String, Lock>> {
    // Each critical section is one map operation: a poisoned lock leaves
    // the map whole.
    map.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::task::{Context, Poll, Waker};

    use super::*;

    #[tokio::test]
    async fn roles_locked_and_released_leave_no_entry() {
        let locks = RoleLocks::default();
        for i in 0..10_000 {
            drop(locks.lock(&format!("job-{i}")).await);
        }
        assert_eq!(locks.len(), 0);
        let mut held = Vec::new();
        for i in 0..10 {
            held.push(locks.lock(&format!("tenant-{i}")).await);
        }
        assert_eq!(locks.len(), 10, "held roles keep their entry");
        drop(held);
        assert_eq!(locks.len(), 0);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_role_has_one_holder_and_its_entry_goes_with_the_last_one() {
        let locks = RoleLocks::default();
        let first = locks.lock("r").await;
        let other = locks.clone();
        let second = tokio::spawn(async move {
            let _g = other.lock("r").await;
        });
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(!second.is_finished(), "the second waits for the first");
        assert_eq!(locks.len(), 1);
        drop(first);
        assert_eq!(locks.len(), 1, "the waiter keeps the entry");
        second.await.unwrap();
        assert_eq!(locks.len(), 0);
    }

    #[test]
    fn a_waiter_that_gives_up_leaves_nothing() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let locks = RoleLocks::default();
        let held = rt.block_on(locks.lock("r"));
        let mut waiter = Box::pin(locks.lock("r"));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(waiter.as_mut().poll(&mut cx).is_pending());
        drop(held);
        drop(waiter);
        assert_eq!(locks.len(), 0, "the holder went first");

        let held = rt.block_on(locks.lock("r"));
        let mut waiter = Box::pin(locks.lock("r"));
        assert!(waiter.as_mut().poll(&mut cx).is_pending());
        drop(waiter);
        assert_eq!(locks.len(), 1, "the holder keeps the entry");
        drop(held);
        assert_eq!(locks.len(), 0, "the waiter went first");
        // The role is free again afterwards.
        let mut again = Box::pin(locks.lock("r"));
        assert!(matches!(again.as_mut().poll(&mut cx), Poll::Ready(_)));
    }

    /// Entries come and go while many tasks on several threads lock a few
    /// roles: never two holders of one role at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn pruning_never_lets_two_holders_of_a_role_in() {
        const ROLES: usize = 3;
        let locks = RoleLocks::default();
        let inside: Arc<Vec<AtomicBool>> =
            Arc::new((0..ROLES).map(|_| AtomicBool::new(false)).collect());
        let entered = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..24)
            .map(|t| {
                let (locks, inside, entered) =
                    (locks.clone(), Arc::clone(&inside), Arc::clone(&entered));
                tokio::spawn(async move {
                    for i in 0..200 {
                        let role = (t + i) % ROLES;
                        let _g = locks.lock(&format!("role-{role}")).await;
                        assert!(
                            !inside[role].swap(true, Ordering::SeqCst),
                            "two holders of role-{role}"
                        );
                        entered.fetch_add(1, Ordering::Relaxed);
                        tokio::task::yield_now().await;
                        inside[role].store(false, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(entered.load(Ordering::Relaxed), 24 * 200);
        assert_eq!(locks.len(), 0);
    }
}
