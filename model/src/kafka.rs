//! Kafka as the model sees it: each function is one atomic step of the
//! cluster (an append acknowledged with acks=all, an InitProducerId, a
//! transaction's commit or abort).
//!
//! * **The state partition** is a log of [`Entry`]s. A plain append commits
//!   at once; a transactional one is `Open` until its transaction commits or
//!   aborts. `read_committed` readers see committed entries below the last
//!   stable offset ([`State::last_stable`]).
//! * **The coordinator** holds each role's current (producer id, epoch).
//!   InitProducerId aborts the role's open transaction and bumps the epoch,
//!   rotating to a fresh producer id with epoch 0 once the epoch reaches
//!   [`crate::Config::max_epoch`]. The conditional bump (KIP-360: the
//!   caller's producer id and epoch) only bumps when the caller's epoch is
//!   the current one. A transaction open past its timeout (the lease
//!   duration) is aborted and the epoch bumped. A lease's commit opens the
//!   next transaction ahead ([`open_ahead`]): open, without an entry, from
//!   that tick, so the timeout counts from the commit before a write.
//! * **A write through an epoch** is fenced unless the epoch is the role's
//!   current one.

use std::sync::Arc;

use krabka_coordination::FencingToken;

use crate::state::{Entry, State, Status};

/// The next token of the coordinator after `current`.
fn bump_of(s: &mut State, current: Option<FencingToken>, max_epoch: i16) -> FencingToken {
    match current {
        Some(t) if t.producer_epoch < max_epoch => {
            FencingToken::new(t.producer_id, t.producer_epoch + 1)
        }
        previous => {
            if previous.is_some() {
                s.ghost.exhausted = true;
            }
            let id = s.next_producer_id;
            s.next_producer_id += 1;
            FencingToken::new(id, 0)
        }
    }
}

/// Decides every entry of `role`'s open transaction (commit or abort).
pub fn decide_open(s: &mut State, role: usize, commit: bool) {
    for e in s.log.iter_mut() {
        if e.status == Status::Open(role as u8) {
            e.status = if commit {
                Status::Committed
            } else {
                Status::Aborted
            };
        }
    }
    s.coordinator[role].open = None;
}

/// InitProducerId for `role`'s transactional id: aborts its open
/// transaction and returns the new token. Returns the token it superseded.
pub fn init_producer_id(
    s: &mut State,
    role: usize,
    max_epoch: i16,
) -> (FencingToken, Option<FencingToken>) {
    decide_open(s, role, false);
    let previous = s.coordinator[role].epoch;
    let next = bump_of(s, previous, max_epoch);
    s.coordinator[role].epoch = Some(next);
    (next, previous)
}

/// The conditional bump: bumps only when `token` is `role`'s current epoch.
/// Returns the new token, or `None` when a newer epoch exists.
pub fn bump_if_current(
    s: &mut State,
    role: usize,
    token: FencingToken,
    max_epoch: i16,
) -> Option<FencingToken> {
    if s.coordinator[role].epoch != Some(token) {
        return None;
    }
    Some(init_producer_id(s, role, max_epoch).0)
}

/// True when `token` is `role`'s current epoch (a write through it is not
/// fenced).
pub fn current(s: &State, role: usize, token: FencingToken) -> bool {
    s.coordinator[role].epoch == Some(token)
}

/// A plain (idempotent, non-transactional) append: committed at once.
pub fn append(s: &mut State, key: Arc<[u8]>, value: Option<Arc<[u8]>>) -> u16 {
    s.log.push(Entry {
        key,
        value,
        status: Status::Committed,
    });
    (s.log.len() - 1) as u16
}

/// A transactional write of one state record through `token`: fenced
/// (`false`) unless the epoch is current; otherwise committed at once, or
/// left open when `open` (the writer froze mid-transaction).
pub fn write_txn(
    s: &mut State,
    role: usize,
    token: FencingToken,
    key: Arc<[u8]>,
    value: Option<Arc<[u8]>>,
    open: bool,
) -> bool {
    if !current(s, role, token) {
        return false;
    }
    // A transaction opened ahead is the one this write joins: it began
    // then, and this write's commit ends it.
    let ahead = s.coordinator[role].open.filter(|(t, _)| *t == token);
    let status = if open {
        let since = ahead.map_or(s.now, |(_, since)| since);
        s.coordinator[role].open = Some((token, since));
        Status::Open(role as u8)
    } else {
        if ahead.is_some() && !has_open_entries(s, role) {
            s.coordinator[role].open = None;
        }
        Status::Committed
    };
    s.log.push(Entry { key, value, status });
    true
}

/// A transactional write of two state records through `token`, in one
/// transaction committed at once: both written, or (fenced, `false`)
/// neither.
pub fn write_txn_pair(
    s: &mut State,
    role: usize,
    token: FencingToken,
    first: (Arc<[u8]>, Option<Arc<[u8]>>),
    second: (Arc<[u8]>, Option<Arc<[u8]>>),
) -> bool {
    if !write_txn(s, role, token, first.0, first.1, false) {
        return false;
    }
    s.log.push(Entry {
        key: second.0,
        value: second.1,
        status: Status::Committed,
    });
    true
}

/// True when an entry of `role`'s open transaction is on the partition.
fn has_open_entries(s: &State, role: usize) -> bool {
    s.log.iter().any(|e| e.status == Status::Open(role as u8))
}

/// After a lease of `token` committed: the next transaction is opened
/// ahead (the state partition added, nothing written), unless one is open.
/// The coordinator's timeout counts from now.
pub fn open_ahead(s: &mut State, role: usize, token: FencingToken) {
    if current(s, role, token) && s.coordinator[role].open.is_none() {
        s.coordinator[role].open = Some((token, s.now));
    }
}

/// A guarded write to the data topic through `token`: fenced (`false`)
/// unless the epoch is current.
pub fn write_guarded(s: &mut State, role: usize, token: FencingToken) -> bool {
    if !current(s, role, token) {
        return false;
    }
    s.data.push((role as u8, token));
    true
}

/// The roles whose open transaction has passed its timeout (`lease` ticks).
pub fn timed_out(s: &State, lease: u8) -> impl Iterator<Item = usize> + '_ {
    s.coordinator
        .iter()
        .enumerate()
        .filter(move |(_, c)| {
            c.open
                .is_some_and(|(_, since)| s.now >= since.saturating_add(lease))
        })
        .map(|(r, _)| r)
}

/// The coordinator times `role`'s open transaction out: aborts it and bumps
/// the epoch, which fences the holder.
pub fn time_out(s: &mut State, role: usize, max_epoch: i16) {
    init_producer_id(s, role, max_epoch);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::LeaseModel;
    use stateright::Model;

    fn state() -> State {
        LeaseModel::new(crate::Config::base())
            .init_states()
            .remove(0)
    }

    #[test]
    fn init_producer_id_rotates_past_the_max_epoch_to_a_newer_token() {
        let mut s = state();
        let tokens: Vec<FencingToken> = (0..4).map(|_| init_producer_id(&mut s, 0, 1).0).collect();
        let t = FencingToken::new;
        assert_eq!(tokens, [t(0, 0), t(0, 1), t(1, 0), t(1, 1)]);
        // The core's order ranks the rotated token above the exhausted one.
        assert!(tokens.windows(2).all(|w| w[0] < w[1]));
        assert!(s.ghost.exhausted);
    }

    #[test]
    fn the_conditional_bump_is_refused_once_a_newer_epoch_exists() {
        let mut s = state();
        let old = init_producer_id(&mut s, 0, 5).0;
        let new = init_producer_id(&mut s, 0, 5).0;
        assert_eq!(bump_if_current(&mut s, 0, old, 5), None);
        assert_eq!(s.coordinator[0].epoch, Some(new));
        assert_eq!(
            bump_if_current(&mut s, 0, new, 5),
            Some(FencingToken::new(0, 2))
        );
    }

    #[test]
    fn an_open_transaction_holds_the_last_stable_offset_until_a_mint_aborts_it() {
        let mut s = state();
        let token = init_producer_id(&mut s, 0, 5).0;
        let key: Arc<[u8]> = Arc::from(&b"k"[..]);
        assert!(write_txn(&mut s, 0, token, key.clone(), None, true));
        append(&mut s, key.clone(), None);
        assert_eq!((s.last_stable(), s.log.len()), (0, 2));
        let (next, previous) = init_producer_id(&mut s, 0, 5);
        assert_eq!(previous, Some(token));
        assert_eq!(s.log[0].status, Status::Aborted);
        assert_eq!(s.last_stable(), 2);
        // The aborted epoch's writes are fenced; the new one's are not.
        assert!(!write_txn(&mut s, 0, token, key.clone(), None, false));
        assert!(write_txn(&mut s, 0, next, key, None, false));
        assert!(!write_guarded(&mut s, 0, token));
    }

    #[test]
    fn a_transaction_opened_ahead_holds_nothing_back_and_times_out_from_the_commit() {
        let mut s = state();
        let token = init_producer_id(&mut s, 0, 5).0;
        let key: Arc<[u8]> = Arc::from(&b"k"[..]);
        s.now = 3;
        assert!(write_txn(&mut s, 0, token, key.clone(), None, false));
        open_ahead(&mut s, 0, token);
        assert_eq!(s.coordinator[0].open, Some((token, 3)));
        assert_eq!(s.last_stable(), s.log.len() as u16, "no entry is held back");
        // A write that stalls mid-transaction joins it: the timeout still
        // counts from the commit before it.
        s.now = 5;
        assert!(write_txn(&mut s, 0, token, key.clone(), None, true));
        assert_eq!(s.coordinator[0].open, Some((token, 3)));
        assert_eq!(timed_out(&s, 4).count(), 0);
        s.now = 7;
        assert_eq!(timed_out(&s, 4).collect::<Vec<_>>(), [0]);
        // A write that commits ends the transaction opened ahead.
        let mut s = state();
        let token = init_producer_id(&mut s, 0, 5).0;
        open_ahead(&mut s, 0, token);
        assert!(write_txn(&mut s, 0, token, key.clone(), None, false));
        assert_eq!(s.coordinator[0].open, None);
        // Nothing is opened ahead for a superseded epoch.
        let next = init_producer_id(&mut s, 0, 5).0;
        open_ahead(&mut s, 0, token);
        assert_eq!(s.coordinator[0].open, None);
        assert!(write_txn(&mut s, 0, next, key, None, false));
    }
}
