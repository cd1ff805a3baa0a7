//! What a partition's reader has read, kept for every follower of the
//! partition ([`Seen`]).
//!
//! Roles share the state topic's partitions (16 by default), so a process
//! that acquires a thousand roles follows each partition for some sixty of
//! them at once, through one consumer position per partition. Without what
//! is kept here, each new follower read the whole partition from its first
//! offset (renewals of every role included: a partition's cost grew with its
//! history), and each follower's poll from its own offset moved the shared
//! position back and forth, a seek and a fresh fetch each time.
//!
//! [`Seen`] covers one stretch of offsets read without a gap, from a read
//! of the whole partition on:
//!
//! * **A compacted view** ([`Seen::view`]): the latest record of each key,
//!   as Kafka's log compaction keeps it. A lease key whose latest record
//!   is a tombstone keeps the value before the tombstone too, and a
//!   registration key whose latest record is a tombstone is left out, so a
//!   [`crate::RoleState`] built from the view is, in all an election reads
//!   of it, the one built from every record (a lease tombstone's cleared
//!   deadline, [`crate::RoleState::last_cleared_deadline`], needs the lease
//!   it cleared). A value superseded by a later one of its key is left out, as
//!   compaction leaves it out; a superseded malformed value then no longer
//!   halts a role's acquires, as after compaction.
//! * **The recent records** ([`Seen::since`]): every record of the last
//!   [`TAIL`] read, so a follower a little behind reads on without moving
//!   the consumer.
//!
//! Records enter only through [`Seen::extend`] with a read that starts
//! where the kept stretch ends or before; a read that starts after it
//! leaves `Seen` as it was. So the stretch never has a gap, and every offset
//! below [`Seen::next`] is accounted for.
//!
//! # What is let go
//!
//! A role that resigned and that no member is registered in any more leaves
//! its lease key behind (the tombstone and the lease it cleared): a process
//! that leads a new role per job would keep one per job for its whole life.
//! Such a key is dropped from the view once its cleared deadline is
//! [`FORGET_CLEARED`] older than the newest lease grant read from the
//! partition (the partition's own clock: the wall time of the members that
//! renew there; a quiet partition keeps what it has). What that changes for
//! an election: a member that registers in the role later takes its own
//! registration time as its challenge base
//! ([`crate::RoleState::last_cleared_deadline`] is unknown), which is later
//! than the forgotten deadline plus any stagger, so it never challenges
//! sooner than it would have. The sweep is one pass over the keys at most
//! once per [`SWEEP_EVERY`] of that clock.

use std::collections::{BTreeMap, HashMap, VecDeque};

use crate::transport::{ReadBatch, Record};

/// How many of the most recent records [`Seen`] keeps for followers that
/// are behind.
pub(crate) const TAIL: usize = 1024;

/// How long after its cleared deadline (on the partition's clock) a lease
/// tombstone of a role nobody is registered in is dropped from the view:
/// far longer than any challenge stagger and any clock skew between members.
pub(crate) const FORGET_CLEARED: i64 = 600_000;

/// How often (on the partition's clock, ms) the view is swept for such
/// tombstones.
const SWEEP_EVERY: i64 = 60_000;

/// What one key's records leave in the compacted view.
#[derive(Debug, Clone)]
struct Latest {
    /// The offset of the key's latest record.
    offset: i64,
    /// When the latest record is a tombstone: the offset of the value before
    /// it, if one was read.
    cleared: Option<i64>,
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct Seen {
    /// The records the compacted view keeps, by offset.
    view: BTreeMap<i64, Record>,
    /// Each key's place in `view`.
    keys: HashMap<Vec<u8>, Latest>,
    /// Every record read at offsets `tail_from..next`, in offset order.
    tail: VecDeque<Record>,
    /// The first offset `tail` accounts for.
    tail_from: i64,
    /// The offset after the stretch read: every offset below it was read
    /// (records, transaction markers and aborted records alike).
    next: i64,
    tail_len: usize,
    /// The newest lease grant read (wall ms of its writer): the partition's
    /// clock for [`FORGET_CLEARED`].
    clock: i64,
    /// The clock at the last sweep.
    swept: i64,
}

fn is_tombstone(r: &Record) -> bool {
    r.value.as_ref().is_none_or(Vec::is_empty)
}

fn is_registration(key: &[u8]) -> bool {
    crate::codec::decode_key_ref(key).is_ok_and(|k| k.kind == crate::codec::KeyKind::Registration)
}

impl Seen {
    /// What a read of the whole partition found: `records` are every
    /// committed record from its first offset, `next` the offset after them
    /// (past transaction markers).
    pub(crate) fn new(records: &[Record], next: i64) -> Seen {
        Seen::with_tail(records, next, TAIL)
    }

    fn with_tail(records: &[Record], next: i64, tail_len: usize) -> Seen {
        let mut seen = Seen {
            view: BTreeMap::new(),
            keys: HashMap::new(),
            tail: VecDeque::new(),
            tail_from: 0,
            next: 0,
            tail_len,
            clock: i64::MIN,
            swept: i64::MIN,
        };
        seen.tail_from = records.first().map_or(next, |r| r.offset);
        seen.add(records, next);
        seen
    }

    /// The offset after the stretch read.
    pub(crate) fn next(&self) -> i64 {
        self.next
    }

    /// Adds a read that started at or before [`Seen::next`] and ended
    /// before `next` (of its records, those from [`Seen::next`] on: a read
    /// is gapless, so they continue the stretch); a read that started
    /// after it is refused (returns false) and changes nothing. Only what
    /// is kept is copied.
    pub(crate) fn extend(&mut self, from: i64, records: &[Record], next: i64) -> bool {
        if from > self.next {
            return false;
        }
        self.add(records, next);
        true
    }

    fn add(&mut self, records: &[Record], next: i64) {
        for r in records {
            if r.offset < self.next {
                continue;
            }
            self.next = r.offset + 1;
            self.keep(r);
            self.tail.push_back(r.clone());
        }
        self.next = self.next.max(next);
        while self.tail.len() > self.tail_len {
            if let Some(r) = self.tail.pop_front() {
                self.tail_from = r.offset + 1;
            }
        }
        if self.clock.saturating_sub(self.swept) >= SWEEP_EVERY {
            self.swept = self.clock;
            self.forget_cleared();
        }
    }

    /// Drops the lease keys of roles nobody is registered in whose cleared
    /// deadline is [`FORGET_CLEARED`] behind the partition's clock (module
    /// docs).
    fn forget_cleared(&mut self) {
        let registered: std::collections::HashSet<&str> = self
            .keys
            .keys()
            .filter_map(|k| crate::codec::decode_key_ref(k).ok())
            .filter(|k| k.kind == crate::codec::KeyKind::Registration)
            .map(|k| k.role)
            .collect();
        let horizon = self.clock.saturating_sub(FORGET_CLEARED);
        let forgotten: Vec<Vec<u8>> = self
            .keys
            .iter()
            .filter(|(key, latest)| {
                let Some(cleared) = latest.cleared else {
                    return false;
                };
                let deadline = self
                    .view
                    .get(&cleared)
                    .and_then(|r| r.value.as_deref())
                    .and_then(|v| crate::codec::decode_lease_ref(v).ok())
                    .map(|(_, _, _, deadline)| deadline);
                let role = crate::codec::decode_key_ref(key)
                    .ok()
                    .filter(|k| k.kind == crate::codec::KeyKind::Lease)
                    .map(|k| k.role);
                matches!((deadline, role), (Some(d), Some(role)) if d < horizon && !registered.contains(role))
            })
            .map(|(key, _)| key.clone())
            .collect();
        for key in forgotten {
            if let Some(old) = self.keys.remove(&key) {
                self.view.remove(&old.offset);
                if let Some(c) = old.cleared {
                    self.view.remove(&c);
                }
            }
        }
    }

    /// Puts `r` into the compacted view: it replaces its key's records,
    /// except that a lease tombstone keeps the value it cleared. A
    /// registration tombstone leaves nothing of its key: a member removed is
    /// a member never seen, and departed members must not pile up in a
    /// long-lived process.
    fn keep(&mut self, r: &Record) {
        let tomb = is_tombstone(r);
        let lease_key = crate::codec::decode_key_ref(&r.key)
            .is_ok_and(|k| k.kind == crate::codec::KeyKind::Lease);
        if let Some(granted) = r
            .value
            .as_deref()
            .filter(|_| lease_key && !tomb)
            .and_then(|v| crate::codec::decode_lease_ref(v).ok())
            .map(|(_, _, granted_at, _)| granted_at)
        {
            self.clock = self.clock.max(granted);
        }
        if tomb && is_registration(&r.key) {
            if let Some(old) = self.keys.remove(&r.key) {
                self.view.remove(&old.offset);
                if let Some(c) = old.cleared {
                    self.view.remove(&c);
                }
            }
            return;
        }
        let mut cleared = None;
        if let Some(old) = self.keys.remove(&r.key) {
            let old_record = self.view.remove(&old.offset);
            match (tomb, old.cleared) {
                // A tombstone after a tombstone: the value the first one
                // cleared is still the one before the latest.
                (true, Some(c)) => cleared = Some(c),
                (true, None) => {
                    if let Some(o) = old_record.filter(|o| !is_tombstone(o)) {
                        cleared = Some(o.offset);
                        self.view.insert(o.offset, o);
                    }
                }
                (false, Some(c)) => {
                    self.view.remove(&c);
                }
                (false, None) => {}
            }
        }
        self.keys.insert(
            r.key.clone(),
            Latest {
                offset: r.offset,
                cleared,
            },
        );
        self.view.insert(r.offset, r.clone());
    }

    /// How many keys the compacted view holds.
    pub(crate) fn keys(&self) -> usize {
        self.keys.len()
    }

    /// The compacted view and the offset to read on from: what a new
    /// follower starts from.
    pub(crate) fn view(&self) -> ReadBatch {
        ReadBatch {
            records: self.view.values().cloned().collect(),
            next_offset: self.next,
        }
    }

    /// Every record from `from` to [`Seen::next`], if the kept recent
    /// records reach back to `from` and `from` lies before `next`; `None`
    /// otherwise (the caller reads from the partition).
    pub(crate) fn since(&self, from: i64) -> Option<ReadBatch> {
        if from < self.tail_from || from >= self.next {
            return None;
        }
        let start = self.tail.partition_point(|r| r.offset < from);
        Some(ReadBatch {
            records: self.tail.range(start..).cloned().collect(),
            next_offset: self.next,
        })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::codec::{encode_key, encode_lease, encode_registration, Key, Lease, Registration};
    use crate::{FencingToken, RoleState};

    const ROLES: [&str; 2] = ["a", "b"];
    const MEMBERS: [&str; 3] = ["m1", "m2", "m3"];

    /// A record of one of a few keys: (role, which key, value or tombstone).
    fn record(offset: i64, role: usize, key: usize, value: Option<i64>) -> Record {
        let role = ROLES[role % ROLES.len()];
        let (key, value) = if key == 0 {
            let v = value.map(|t| {
                encode_lease(&Lease {
                    member: MEMBERS[t as usize % MEMBERS.len()].to_owned(),
                    token: FencingToken::new(7, t as i16),
                    granted_at: t * 10,
                    deadline: t * 10 + 5,
                })
                .unwrap()
            });
            (encode_key(&Key::lease(role)).unwrap(), v)
        } else {
            let member = MEMBERS[(key - 1) % MEMBERS.len()];
            let v = value.map(|t| {
                encode_registration(&Registration {
                    member: member.to_owned(),
                    registered_at: t,
                })
                .unwrap()
            });
            (encode_key(&Key::registration(role, member)).unwrap(), v)
        };
        Record { offset, key, value }
    }

    /// What an election reads of a state, now and after any later record:
    /// the roster, the lease, and with no lease the cleared deadline (with
    /// a lease, the next tombstone replaces it with that lease's, so it is
    /// never read). Not the bookkeeping of which offsets were applied.
    fn seen_by_election(s: &RoleState) -> impl PartialEq + std::fmt::Debug {
        (
            s.roster().cloned().collect::<Vec<_>>(),
            s.lease().cloned(),
            s.lease().is_none().then(|| s.last_cleared_deadline()),
        )
    }

    fn records_strategy() -> impl Strategy<Value = Vec<Record>> {
        // Offsets with gaps (transaction markers, aborted records).
        prop::collection::vec(
            (
                1i64..3,
                0usize..2,
                0usize..4,
                prop::option::weighted(0.7, 1i64..50),
            ),
            0..60,
        )
        .prop_map(|v| {
            let mut offset = 0;
            v.into_iter()
                .map(|(gap, role, key, value)| {
                    offset += gap;
                    record(offset, role, key, value)
                })
                .collect()
        })
    }

    proptest! {
        /// A state built from the compacted view is the state built from
        /// every record, however the records were read (in one go, or in
        /// pieces that continue or overlap each other).
        #[test]
        fn the_view_builds_the_state_every_record_builds(
            records in records_strategy(),
            cuts in prop::collection::vec(0usize..60, 0..4),
            back in 0usize..5,
        ) {
            let end = records.last().map_or(0, |r| r.offset + 2);
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(records.len())).collect();
            cuts.sort_unstable();
            let first = cuts.first().copied().unwrap_or(records.len());
            let next_of = |i: usize| records.get(i).map_or(end, |r| r.offset);
            let mut seen = Seen::with_tail(&records[..first], next_of(first), 8);
            let mut at = first;
            for &c in cuts.iter().skip(1).chain(std::iter::once(&records.len())) {
                // Each piece starts up to `back` records before the end of
                // the last (a follower behind that read past the end).
                let start = at.saturating_sub(back);
                let from = if start == at { seen.next() } else { records[start].offset };
                prop_assert!(seen.extend(from, &records[start..c], next_of(c)));
                at = c;
            }
            let view = seen.view();
            prop_assert_eq!(view.next_offset, end);
            prop_assert!(view.records.windows(2).all(|w| w[0].offset < w[1].offset));
            for role in ROLES {
                let all = RoleState::build(role, &records).unwrap();
                let compact = RoleState::build(role, &view.records).unwrap();
                prop_assert_eq!(seen_by_election(&compact), seen_by_election(&all));
            }
            // The recent records are exactly the last ones read.
            let kept = records.len().min(8);
            let from = if kept == 0 { end } else { records[records.len() - kept].offset };
            if from < end {
                let tail = seen.since(from).unwrap();
                prop_assert_eq!(&tail.records[..], &records[records.len() - kept..]);
                prop_assert_eq!(tail.next_offset, end);
            }
        }
    }

    /// A record of `role`'s lease granted at `granted` (a tombstone with
    /// `None`).
    fn lease_at(offset: i64, role: &str, granted: Option<i64>) -> Record {
        Record {
            offset,
            key: encode_key(&Key::lease(role)).unwrap(),
            value: granted.map(|g| {
                encode_lease(&Lease {
                    member: "m1".to_owned(),
                    token: FencingToken::new(7, 1),
                    granted_at: g,
                    deadline: g + 5_000,
                })
                .unwrap()
            }),
        }
    }

    #[test]
    fn a_resigned_role_nobody_is_registered_in_is_let_go_after_its_deadline() {
        const T: i64 = 1_700_000_000_000;
        let reg = |offset, role: &str, member: &str, at: Option<i64>| Record {
            offset,
            key: encode_key(&Key::registration(role, member)).unwrap(),
            value: at.map(|t| {
                encode_registration(&Registration {
                    member: member.to_owned(),
                    registered_at: t,
                })
                .unwrap()
            }),
        };
        // "job" led once, resigned and deregistered; "kept" resigned but a
        // member stays registered; "steady" renews on.
        let records = vec![
            reg(0, "job", "m1", Some(T)),
            lease_at(1, "job", Some(T)),
            lease_at(2, "job", None),
            reg(3, "job", "m1", None),
            reg(4, "kept", "m2", Some(T)),
            lease_at(5, "kept", Some(T)),
            lease_at(6, "kept", None),
            lease_at(7, "steady", Some(T)),
        ];
        let mut seen = Seen::new(&records, 8);
        let keys = seen.keys();
        let job = encode_key(&Key::lease("job")).unwrap();
        assert!(seen.keys.contains_key(&job));
        // The partition's clock FORGET_CLEARED past the cleared deadline,
        // less a moment: kept.
        let almost = T + 5_000 + FORGET_CLEARED - 1;
        assert!(seen.extend(8, &[lease_at(8, "steady", Some(almost))], 9));
        assert_eq!(seen.keys(), keys);
        // Past it, at the next sweep: the job's lease key goes; the role a
        // member is registered in keeps its cleared deadline.
        let past = almost + SWEEP_EVERY;
        assert!(seen.extend(9, &[lease_at(9, "steady", Some(past))], 10));
        assert!(!seen.keys.contains_key(&job));
        assert_eq!(seen.keys(), keys - 1);
        let view = seen.view();
        let kept = RoleState::build("kept", &view.records).unwrap();
        assert_eq!(kept.last_cleared_deadline(), Some(T + 5_000));
        assert!(view.records.iter().all(|r| r.key != job), "{view:?}");
        // A member joining the job later starts from its own registration.
        assert!(seen.extend(10, &[reg(10, "job", "m3", Some(past))], 11));
        let job_state = RoleState::build("job", &seen.view().records).unwrap();
        assert_eq!(job_state.last_cleared_deadline(), None);
        assert_eq!(job_state.roster().count(), 1);
    }

    #[test]
    fn a_tombstone_keeps_the_lease_it_cleared_and_nothing_older() {
        let records = vec![
            record(0, 0, 0, Some(1)),
            record(1, 0, 0, None),
            record(2, 0, 0, Some(2)),
            record(3, 0, 1, Some(5)),
            record(4, 0, 0, None),
            record(5, 0, 0, None),
            record(6, 0, 1, None),
        ];
        let seen = Seen::new(&records, 9);
        let offsets: Vec<i64> = seen.view().records.iter().map(|r| r.offset).collect();
        // The lease of offset 2 (cleared) and the last lease tombstone; the
        // removed registration leaves nothing.
        assert_eq!(offsets, [2, 5]);
        let all = RoleState::build("a", &records).unwrap();
        let compact = RoleState::build("a", &seen.view().records).unwrap();
        assert_eq!(compact.last_cleared_deadline(), Some(25));
        assert_eq!(seen_by_election(&compact), seen_by_election(&all));
    }

    #[test]
    fn only_a_read_that_reaches_the_stretch_is_added() {
        let mut seen = Seen::new(&[record(0, 0, 1, Some(1))], 1);
        // Offsets 1..3 were transaction markers: the stretch ends at 3.
        assert!(seen.extend(1, &[], 3));
        assert_eq!(seen.next(), 3);
        // A read from after the end is not (offsets 3 and 4 unaccounted).
        assert!(!seen.extend(5, &[record(5, 0, 2, Some(2))], 6));
        assert_eq!(seen.next(), 3);
        // A read from behind that ends before the end adds nothing.
        assert!(seen.extend(0, &[record(0, 0, 1, Some(1))], 1));
        assert_eq!(seen.next(), 3);
        assert_eq!(seen.view().records.len(), 1);
        assert!(seen.extend(3, &[record(3, 0, 2, Some(2))], 4));
        assert_eq!(seen.view().records.len(), 2);
        // A read from behind that goes past the end adds what is past it.
        assert!(seen.extend(
            0,
            &[
                record(0, 0, 1, Some(1)),
                record(3, 0, 2, Some(2)),
                record(5, 1, 1, Some(7))
            ],
            7
        ));
        assert_eq!(seen.next(), 7);
        assert_eq!(seen.view().records.len(), 3);
        assert_eq!(seen.since(4).unwrap().records.len(), 1);
    }

    #[test]
    fn recent_records_serve_followers_behind_and_no_one_else() {
        let records: Vec<Record> = (0..10).map(|i| record(i * 2, 0, 1, Some(i))).collect();
        let seen = Seen::with_tail(&records, 20, 4);
        // The last four records: offsets 12, 14, 16, 18.
        // Offset 10 was dropped from the tail; 11 holds no record.
        assert!(seen.since(10).is_none(), "the tail starts after 10");
        assert_eq!(seen.since(11).unwrap().records.len(), 4);
        let b = seen.since(12).unwrap();
        assert_eq!(b.records.len(), 4);
        assert_eq!(b.next_offset, 20);
        let b = seen.since(17).unwrap();
        assert_eq!(b.records.iter().map(|r| r.offset).collect::<Vec<_>>(), [18]);
        // Past the last record but before the end (a marker): nothing new,
        // and the position moves on.
        let b = seen.since(19).unwrap();
        assert!(b.records.is_empty());
        assert_eq!(b.next_offset, 20);
        // At the end: the caller reads on from the partition.
        assert!(seen.since(20).is_none());
    }
}
