//! Tests of the role state built from the log.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use krabka_coordination::{
    encode_key, encode_lease, encode_registration, FencingToken, Key, Lease, Part, Record,
    Registration, RoleState, RosterEntry,
};

/// Counts the allocations of the current thread, so a test can assert that a
/// path does not allocate (tests run on parallel threads).
struct CountingAllocator;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count_allocation() {
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
}

fn allocations() -> u64 {
    ALLOCATIONS.with(|c| c.get())
}

unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_allocation();
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_allocation();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// Builds the records of one partition, with consecutive offsets from 0.
#[derive(Default)]
struct Log {
    records: Vec<Record>,
}

impl Log {
    fn next_offset(&self) -> i64 {
        self.records.len() as i64
    }

    fn push(&mut self, key: Vec<u8>, value: Option<Vec<u8>>) -> i64 {
        let offset = self.next_offset();
        self.records.push(Record { offset, key, value });
        offset
    }

    fn register(&mut self, role: &str, member: &str, at: i64) -> i64 {
        let key = encode_key(&Key::registration(role, member)).unwrap();
        let value = encode_registration(&Registration {
            member: member.into(),
            registered_at: at,
        })
        .unwrap();
        self.push(key, Some(value))
    }

    fn deregister(&mut self, role: &str, member: &str, value: Option<Vec<u8>>) -> i64 {
        self.push(encode_key(&Key::registration(role, member)).unwrap(), value)
    }

    fn lease(&mut self, role: &str, l: &Lease) -> i64 {
        let key = encode_key(&Key::lease(role)).unwrap();
        self.push(key, Some(encode_lease(l).unwrap()))
    }

    fn clear_lease(&mut self, role: &str, value: Option<Vec<u8>>) -> i64 {
        self.push(encode_key(&Key::lease(role)).unwrap(), value)
    }

    fn build(&self, role: &str) -> RoleState {
        RoleState::build(role, &self.records).unwrap()
    }
}

fn lease(member: &str, pid: i64, epoch: i16, granted: i64, deadline: i64) -> Lease {
    Lease {
        member: member.into(),
        token: FencingToken::new(pid, epoch),
        granted_at: granted,
        deadline,
    }
}

fn names(state: &RoleState) -> Vec<&str> {
    state.roster().map(|e| e.member.as_str()).collect()
}

#[test]
fn empty_state() {
    let s = RoleState::new("orders");
    assert_eq!(s.role(), "orders");
    assert_eq!(s.roster().len(), 0);
    assert_eq!(s.roster_len(), 0);
    assert_eq!(s.lease(), None);
    assert_eq!(s.last_offset(), None);
    assert_eq!(s.last_cleared_deadline(), None);
    assert_eq!(s.malformed_keys(), 0);
    assert_eq!(s.rank_of("a"), None);
    assert!(!s.is_registered("a"));
    assert_eq!(RoleState::build("orders", &[]).unwrap(), s);
}

#[test]
fn roster_is_in_registration_offset_order() {
    let mut log = Log::default();
    log.register("orders", "b", 500);
    log.register("orders", "a", 100); // registered_at does not rank; the offset does
    log.register("orders", "c", 900);
    let s = log.build("orders");
    assert_eq!(names(&s), ["b", "a", "c"]);
    assert_eq!(s.rank_of("b"), Some(0));
    assert_eq!(s.rank_of("a"), Some(1));
    assert_eq!(s.rank_of("c"), Some(2));
    assert_eq!(s.rank_of("d"), None);
    assert_eq!(
        s.entry("a"),
        Some(&RosterEntry {
            member: "a".into(),
            offset: 1,
            registered_at: 100
        })
    );
    assert_eq!(s.last_offset(), Some(2));
}

#[test]
fn re_registration_moves_the_member_to_the_tail() {
    let mut log = Log::default();
    log.register("orders", "a", 1);
    log.register("orders", "b", 2);
    log.register("orders", "c", 3);
    log.register("orders", "a", 4);
    let s = log.build("orders");
    assert_eq!(names(&s), ["b", "c", "a"]);
    assert_eq!(s.rank_of("a"), Some(2));
    assert_eq!(s.entry("a").unwrap().offset, 3);
    assert_eq!(s.entry("a").unwrap().registered_at, 4);
    assert_eq!(s.roster_len(), 3);
}

#[test]
fn registration_tombstone_null_or_empty_removes_the_member() {
    for value in [None, Some(Vec::new())] {
        let mut log = Log::default();
        log.register("orders", "a", 1);
        log.register("orders", "b", 2);
        log.register("orders", "c", 3);
        log.deregister("orders", "b", value.clone());
        let s = log.build("orders");
        assert_eq!(names(&s), ["a", "c"], "tombstone value {value:?}");
        assert!(!s.is_registered("b"));
        assert_eq!(s.rank_of("c"), Some(1));
        assert_eq!(s.entry("b"), None);
    }
}

#[test]
fn tombstone_of_an_unknown_member_is_harmless_and_a_member_can_come_back() {
    let mut log = Log::default();
    log.deregister("orders", "ghost", None);
    log.register("orders", "a", 1);
    log.deregister("orders", "a", None);
    log.register("orders", "b", 2);
    log.register("orders", "a", 3);
    let s = log.build("orders");
    assert_eq!(names(&s), ["b", "a"]);
}

#[test]
fn lease_is_the_latest_lease_record() {
    let mut log = Log::default();
    log.register("orders", "a", 1);
    let first = lease("a", 7, 0, 1_000, 31_000);
    let second = lease("a", 7, 0, 11_000, 41_000);
    log.lease("orders", &first);
    assert_eq!(log.build("orders").lease(), Some(&first));
    log.lease("orders", &second);
    let s = log.build("orders");
    assert_eq!(s.lease(), Some(&second));
    // The latest record wins even if its token is older (the log is the order).
    let older = lease("b", 6, 3, 12_000, 42_000);
    log.lease("orders", &older);
    assert_eq!(log.build("orders").lease(), Some(&older));
}

#[test]
fn lease_tombstone_clears_the_lease_and_keeps_its_deadline() {
    for value in [None, Some(Vec::new())] {
        let mut log = Log::default();
        log.lease("orders", &lease("a", 7, 0, 1_000, 31_000));
        log.lease("orders", &lease("a", 7, 0, 11_000, 41_000));
        log.clear_lease("orders", value.clone());
        let s = log.build("orders");
        assert_eq!(s.lease(), None, "tombstone value {value:?}");
        assert_eq!(s.last_cleared_deadline(), Some(41_000));
        // A second tombstone with no lease to clear keeps the last cleared deadline.
        log.clear_lease("orders", None);
        assert_eq!(log.build("orders").last_cleared_deadline(), Some(41_000));
        // A new lease is the lease again; the cleared deadline stays recorded.
        let next = lease("b", 8, 0, 50_000, 80_000);
        log.lease("orders", &next);
        let s = log.build("orders");
        assert_eq!(s.lease(), Some(&next));
        assert_eq!(s.last_cleared_deadline(), Some(41_000));
    }
}

#[test]
fn records_of_other_roles_are_ignored_but_advance_the_offset() {
    let mut log = Log::default();
    log.register("orders", "a", 1);
    log.register("billing", "x", 2);
    log.lease("billing", &lease("x", 3, 1, 5, 6));
    log.register("orders-2", "a", 3);
    log.deregister("billing", "a", None);
    // A malformed value of another role is not decoded, hence no error.
    log.push(
        encode_key(&Key::lease("billing")).unwrap(),
        Some(vec![0xff; 3]),
    );
    let s = log.build("orders");
    assert_eq!(names(&s), ["a"]);
    assert_eq!(s.lease(), None);
    assert_eq!(s.last_offset(), Some(5));
    assert_eq!(s.malformed_keys(), 0);

    // The same partition read for "billing" does decode billing's values.
    let err = RoleState::build("billing", &log.records).unwrap_err();
    assert_eq!(err.part, Part::LeaseValue);
    assert!(err.message.contains("offset 5"), "{err}");
}

#[test]
fn malformed_keys_are_skipped_and_counted() {
    let mut log = Log::default();
    log.register("orders", "a", 1);
    log.push(vec![0, 0, 0, 9], Some(vec![1, 2, 3])); // unknown kind 9
    log.push(Vec::new(), None); // empty key
    log.push(vec![0, 1, 0, 0, 0, 1], None); // v1 key: unsupported version
    log.register("orders", "b", 2);
    let s = log.build("orders");
    assert_eq!(names(&s), ["a", "b"]);
    assert_eq!(s.malformed_keys(), 3);
    assert_eq!(s.last_offset(), Some(4));
}

#[test]
fn malformed_value_of_this_role_is_an_error_naming_the_part_and_offset() {
    let mut log = Log::default();
    log.register("orders", "a", 1);
    let bad_at = log.push(
        encode_key(&Key::lease("orders")).unwrap(),
        Some(vec![0, 0, 0]),
    );
    let err = RoleState::build("orders", &log.records).unwrap_err();
    assert_eq!(err.part, Part::LeaseValue);
    assert!(err.message.contains(&format!("offset {bad_at}")), "{err}");
    assert!(err.message.contains("\"orders\""), "{err}");

    let mut log = Log::default();
    log.push(
        encode_key(&Key::registration("orders", "a")).unwrap(),
        Some(vec![0, 0, 0, 1, b'a']),
    );
    let err = RoleState::build("orders", &log.records).unwrap_err();
    assert_eq!(err.part, Part::RegistrationValue);
    assert!(err.to_string().contains("registered_at"), "{err}");
}

#[test]
fn registration_naming_another_member_is_an_error() {
    let mut log = Log::default();
    let value = encode_registration(&Registration {
        member: "mallory".into(),
        registered_at: 1,
    })
    .unwrap();
    log.push(
        encode_key(&Key::registration("orders", "alice")).unwrap(),
        Some(value),
    );
    let err = RoleState::build("orders", &log.records).unwrap_err();
    assert_eq!(err.part, Part::RegistrationValue);
    assert!(
        err.message.contains("\"mallory\"") && err.message.contains("\"alice\""),
        "{err}"
    );
}

#[test]
fn failed_apply_leaves_the_state_unchanged() {
    let mut log = Log::default();
    log.register("orders", "a", 1);
    log.lease("orders", &lease("a", 1, 0, 10, 20));
    let mut s = log.build("orders");
    let before = s.clone();
    let bad = Record {
        offset: 2,
        key: encode_key(&Key::lease("orders")).unwrap(),
        value: Some(vec![9]),
    };
    assert!(s.apply(&bad).is_err());
    assert_eq!(s, before);
    assert_eq!(s.last_offset(), Some(1));
    // The next good record applies.
    let good = Record {
        offset: 3,
        key: encode_key(&Key::lease("orders")).unwrap(),
        value: None,
    };
    s.apply(&good).unwrap();
    assert_eq!(s.lease(), None);
    assert_eq!(s.last_offset(), Some(3));
}

#[test]
fn apply_one_by_one_equals_build() {
    let mut log = Log::default();
    log.register("orders", "a", 1);
    log.register("orders", "b", 2);
    log.lease("orders", &lease("a", 1, 0, 10, 20));
    log.register("other", "z", 3);
    log.deregister("orders", "a", None);
    log.clear_lease("orders", None);
    log.register("orders", "a", 4);
    let built = log.build("orders");
    let mut s = RoleState::new("orders");
    for r in &log.records {
        s.apply(r).unwrap();
    }
    assert_eq!(s, built);
    // Building in two halves (the second overlapping the first) is the same.
    let (head, _) = log.records.split_at(4);
    let mut s = RoleState::build("orders", head).unwrap();
    for r in &log.records[2..] {
        s.apply(r).unwrap();
    }
    assert_eq!(s, built);
    assert_eq!(names(&s), ["b", "a"]);
}

#[test]
fn redelivered_and_older_offsets_are_ignored() {
    let mut log = Log::default();
    log.register("orders", "a", 1);
    log.register("orders", "b", 2);
    let mut s = log.build("orders");
    let before = s.clone();
    // Re-delivery of offset 0 would move "a" to the tail if it were applied.
    s.apply(&log.records[0]).unwrap();
    assert_eq!(s, before);
    // An older offset with a different content is ignored too.
    let stale = Record {
        offset: 1,
        key: encode_key(&Key::registration("orders", "b")).unwrap(),
        value: None,
    };
    s.apply(&stale).unwrap();
    assert_eq!(names(&s), ["a", "b"]);
    // Even a malformed record at an old offset is not looked at.
    let stale_bad = Record {
        offset: 0,
        key: vec![1],
        value: None,
    };
    s.apply(&stale_bad).unwrap();
    assert_eq!(s.malformed_keys(), 0);
}

#[test]
fn offsets_may_have_gaps() {
    // Compaction removes records but keeps the offsets of those it retains.
    let key_a = encode_key(&Key::registration("orders", "a")).unwrap();
    let key_b = encode_key(&Key::registration("orders", "b")).unwrap();
    let reg = |m: &str| {
        encode_registration(&Registration {
            member: m.into(),
            registered_at: 0,
        })
        .unwrap()
    };
    let records = vec![
        Record {
            offset: 17,
            key: key_b,
            value: Some(reg("b")),
        },
        Record {
            offset: 90,
            key: key_a,
            value: Some(reg("a")),
        },
    ];
    let s = RoleState::build("orders", &records).unwrap();
    assert_eq!(names(&s), ["b", "a"]);
    assert_eq!(s.entry("a").unwrap().offset, 90);
    assert_eq!(s.last_offset(), Some(90));
}

#[test]
fn apply_parts_matches_apply() {
    let mut log = Log::default();
    log.register("orders", "a", 1);
    log.lease("orders", &lease("a", 1, 0, 10, 20));
    let mut s = RoleState::new("orders");
    for r in &log.records {
        s.apply_parts(r.offset, &r.key, r.value.as_deref()).unwrap();
    }
    assert_eq!(s, log.build("orders"));
}

#[test]
fn a_roster_of_many_members_keeps_its_order_under_churn() {
    // A reference model: a Vec in registration order, rebuilt naively.
    let mut log = Log::default();
    let mut model: Vec<String> = Vec::new();
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    for _ in 0..5_000 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let m = format!("m{}", seed % 50);
        model.retain(|x| *x != m);
        if seed % 5 == 0 {
            log.deregister("orders", &m, None);
        } else {
            log.register("orders", &m, 0);
            model.push(m);
        }
    }
    let s = log.build("orders");
    assert_eq!(names(&s), model);
    for (i, m) in model.iter().enumerate() {
        assert_eq!(s.rank_of(m), Some(i));
    }
}

#[test]
fn steady_state_records_do_not_allocate() {
    let mut log = Log::default();
    log.register("orders", "a", 1);
    log.register("orders", "b", 2);
    log.register("billing", "x", 3);
    log.lease("orders", &lease("a", 1, 0, 10, 20));
    let mut s = log.build("orders");
    let start = log.next_offset();
    // Other roles' registrations and renewals, this role's renewals by the same
    // holder, and re-registrations of known members.
    for i in 0..200 {
        log.lease("billing", &lease("x", 3, 1, i, i + 30));
        log.register("billing", "x", i);
        log.lease("orders", &lease("a", 1, 0, 100 + i, 130 + i));
        log.register("orders", if i % 2 == 0 { "a" } else { "b" }, i);
        log.deregister("billing", "y", None);
    }
    let tail = &log.records[start as usize..];
    let before = allocations();
    for r in tail {
        s.apply(r).unwrap();
    }
    let allocated = allocations() - before;
    assert_eq!(
        allocated,
        0,
        "{allocated} allocations for {} records",
        tail.len()
    );
    assert_eq!(s.lease().unwrap().granted_at, 299);
    assert_eq!(names(&s), ["a", "b"]);
    assert_eq!(s, log.build("orders"));

    // A new holder and a new member do allocate their names (the counter works).
    let mut more = Log {
        records: log.records.clone(),
    };
    more.lease("orders", &lease("b", 1, 1, 400, 430));
    more.register("orders", "c", 5);
    let before = allocations();
    for r in &more.records[log.records.len()..] {
        s.apply(r).unwrap();
    }
    assert!(allocations() > before);
}
