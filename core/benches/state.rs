//! Building a role's state from one partition of `__coordination_state`.
//!
//! Each workload is 1,000,000 records of one partition, encoded with the real
//! codec, in offset order; the benchmark is `RoleState::build` of one role over
//! all of them.
//!
//! * `shared_partition`: 1,000 roles share the partition, 3 members each. The
//!   log opens with every registration (3,000 records); the rest is lease
//!   renewals round-robin over the roles (about 1,000 of them the measured
//!   role's), with a member restart (a re-registration that moves it to the
//!   tail) every 1,000 records and a resign (lease tombstone, deregistration,
//!   registration) every 50,000. This is the realistic case: almost every
//!   record belongs to another role.
//! * `hot_role`: the same, but every other record is a lease renewal of the
//!   measured role (500,000 lease values decoded).
//! * `roster_churn`: the measured role has 1,000 members that keep
//!   re-registering and deregistering (half the records), the other half are
//!   other roles' renewals: the worst case for roster updates.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use krabka_coordination::{
    encode_key, encode_lease, encode_registration, FencingToken, Key, Lease, Record, Registration,
    RoleState,
};

const RECORDS: usize = 1_000_000;
const ROLES: usize = 1_000;
const MEMBERS: usize = 3;
const MEASURED: usize = 417;

fn role(i: usize) -> String {
    format!("payments-eu-west-{i:05}")
}

fn member(role: usize, m: usize) -> String {
    format!("worker-{m}.payments-{role:05}.svc.cluster.local:9092")
}

struct Gen {
    records: Vec<Record>,
    now: i64,
}

impl Gen {
    fn push(&mut self, key: Key, value: Option<Vec<u8>>) {
        let offset = self.records.len() as i64;
        self.records.push(Record {
            offset,
            key: encode_key(&key).unwrap(),
            value,
        });
    }

    fn register(&mut self, r: usize, m: &str) {
        let value = encode_registration(&Registration {
            member: m.to_owned(),
            registered_at: self.now,
        })
        .unwrap();
        self.push(Key::registration(role(r), m), Some(value));
    }

    fn renew(&mut self, r: usize, m: &str) {
        self.now += 7;
        let value = encode_lease(&Lease {
            member: m.to_owned(),
            token: FencingToken::new(1_000 + r as i64, 3),
            granted_at: self.now,
            deadline: self.now + 30_000,
        })
        .unwrap();
        self.push(Key::lease(role(r)), Some(value));
    }
}

/// `hot_every`: every `hot_every`-th record is a renewal of the measured role
/// (0 = round-robin only).
fn shared_partition(hot_every: usize) -> Vec<Record> {
    let mut g = Gen {
        records: Vec::with_capacity(RECORDS),
        now: 1_700_000_000_000,
    };
    for r in 0..ROLES {
        for m in 0..MEMBERS {
            g.register(r, &member(r, m));
        }
    }
    let mut next_role = 0;
    while g.records.len() < RECORDS {
        let i = g.records.len();
        if i % 50_000 == 0 {
            let r = (i / 50_000 * 31) % ROLES;
            let m = member(r, 0);
            g.push(Key::lease(role(r)), None);
            g.push(Key::registration(role(r), &m), None);
            g.register(r, &m);
        } else if i % 1_000 == 0 {
            let r = (i / 1_000 * 7) % ROLES;
            g.register(r, &member(r, (i / 1_000) % MEMBERS));
        } else if hot_every > 0 && i % hot_every == 0 {
            g.renew(MEASURED, &member(MEASURED, 0));
        } else {
            let r = next_role;
            next_role = (next_role + 1) % ROLES;
            g.renew(r, &member(r, 0));
        }
    }
    g.records.truncate(RECORDS);
    g.records
}

fn roster_churn() -> Vec<Record> {
    let mut g = Gen {
        records: Vec::with_capacity(RECORDS),
        now: 1_700_000_000_000,
    };
    let members: Vec<String> = (0..1_000).map(|m| member(MEASURED, m)).collect();
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next_role = 0;
    while g.records.len() < RECORDS {
        if g.records.len() % 2 == 0 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let m = &members[(x % 1_000) as usize];
            if x % 4 == 0 {
                g.push(Key::registration(role(MEASURED), m), None);
            } else {
                g.register(MEASURED, m);
            }
        } else {
            let r = next_role;
            next_role = (next_role + 1) % ROLES;
            g.renew(r, &member(r, 0));
        }
    }
    g.records
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("role_state_build");
    group.sample_size(20);
    group.throughput(Throughput::Elements(RECORDS as u64));
    let measured = role(MEASURED);
    for (name, records) in [
        ("shared_partition", shared_partition(0)),
        ("hot_role", shared_partition(2)),
        ("roster_churn", roster_churn()),
    ] {
        let state = RoleState::build(measured.as_str(), &records).unwrap();
        eprintln!(
            "{name}: {} records, roster {}, lease {}, last offset {:?}",
            records.len(),
            state.roster_len(),
            state.lease().is_some(),
            state.last_offset()
        );
        group.bench_function(name, |b| {
            b.iter_batched(
                || (),
                |()| RoleState::build(black_box(measured.as_str()), black_box(&records)).unwrap(),
                // The output is dropped outside the measurement.
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
