//! Encode and decode of every record kind, and the partition of a role.
//!
//! `cargo bench -p krabka-coordination --bench codec`; numbers in docs/benchmarks/README.md.
//!
//! With `KRABKA_BENCH_CPU_TIME=1` the measurement is the benchmark thread's CPU
//! time (`CLOCK_THREAD_CPUTIME_ID`) instead of wall time: on a loaded machine
//! (other builds, brokers) wall time counts the time the thread waits for a
//! core, and CPU time does not.

use std::hint::black_box;
use std::time::Duration;

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::Criterion;
use krabka_coordination::codec::{
    decode_key, decode_lease, decode_registration, encode_key, encode_key_into, encode_lease,
    encode_lease_into, encode_registration, encode_registration_into, Key, Lease, Registration,
};
use krabka_coordination::{murmur2, role_partition, FencingToken};

/// A 32-byte role and a 24-byte member: typical sizes.
const ROLE: &str = "payments/eu-west-1/ledger-writer";
const MEMBER: &str = "ledger-writer-7f9c2d41ab";

fn records() -> (Key, Key, Registration, Lease) {
    assert_eq!(ROLE.len(), 32);
    (
        Key::registration(ROLE, MEMBER),
        Key::lease(ROLE),
        Registration {
            member: MEMBER.into(),
            registered_at: 1_767_225_600_000,
        },
        Lease {
            member: MEMBER.into(),
            token: FencingToken::new(4001, 7),
            granted_at: 1_767_225_600_000,
            deadline: 1_767_225_630_000,
        },
    )
}

fn encode<M: Measurement>(c: &mut Criterion<M>) {
    let (reg_key, lease_key, reg, lease) = records();
    let mut g = c.benchmark_group("encode");
    let mut buf = Vec::with_capacity(256);
    g.bench_function("registration_key_into", |b| {
        b.iter(|| {
            buf.clear();
            encode_key_into(black_box(&reg_key), &mut buf).unwrap();
            black_box(buf.len())
        })
    });
    g.bench_function("lease_key_into", |b| {
        b.iter(|| {
            buf.clear();
            encode_key_into(black_box(&lease_key), &mut buf).unwrap();
            black_box(buf.len())
        })
    });
    g.bench_function("registration_value_into", |b| {
        b.iter(|| {
            buf.clear();
            encode_registration_into(black_box(&reg), &mut buf).unwrap();
            black_box(buf.len())
        })
    });
    g.bench_function("lease_value_into", |b| {
        b.iter(|| {
            buf.clear();
            encode_lease_into(black_box(&lease), &mut buf).unwrap();
            black_box(buf.len())
        })
    });
    // The allocating forms: one Vec of the exact size each.
    g.bench_function("registration_key", |b| {
        b.iter(|| encode_key(black_box(&reg_key)).unwrap())
    });
    g.bench_function("registration_value", |b| {
        b.iter(|| encode_registration(black_box(&reg)).unwrap())
    });
    g.bench_function("lease_value", |b| {
        b.iter(|| encode_lease(black_box(&lease)).unwrap())
    });
    g.finish();
}

fn decode<M: Measurement>(c: &mut Criterion<M>) {
    let (reg_key, lease_key, reg, lease) = records();
    let reg_key = encode_key(&reg_key).unwrap();
    let lease_key = encode_key(&lease_key).unwrap();
    let reg = encode_registration(&reg).unwrap();
    let lease = encode_lease(&lease).unwrap();
    let mut g = c.benchmark_group("decode");
    g.bench_function("registration_key", |b| {
        b.iter(|| decode_key(black_box(&reg_key)).unwrap())
    });
    g.bench_function("lease_key", |b| {
        b.iter(|| decode_key(black_box(&lease_key)).unwrap())
    });
    g.bench_function("registration_value", |b| {
        b.iter(|| decode_registration(black_box(&reg)).unwrap())
    });
    g.bench_function("lease_value", |b| {
        b.iter(|| decode_lease(black_box(&lease)).unwrap())
    });
    // A failure builds its message: the cold path, for scale.
    let mut bad = lease.clone();
    bad.push(0);
    g.bench_function("lease_value_malformed", |b| {
        b.iter(|| decode_lease(black_box(&bad)).unwrap_err())
    });
    g.finish();
}

fn partition<M: Measurement>(c: &mut Criterion<M>) {
    let mut g = c.benchmark_group("partition");
    g.bench_function("murmur2_32_bytes", |b| {
        b.iter(|| murmur2(black_box(ROLE.as_bytes())))
    });
    g.bench_function("role_partition_32_bytes", |b| {
        b.iter(|| role_partition(black_box(ROLE), black_box(16)).unwrap())
    });
    g.finish();
}

/// The CPU time of the calling thread.
struct ThreadCpuTime {
    wall: WallTime,
}

fn thread_cpu_now() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

impl Measurement for ThreadCpuTime {
    type Intermediate = Duration;
    type Value = Duration;

    fn start(&self) -> Duration {
        thread_cpu_now()
    }
    fn end(&self, start: Duration) -> Duration {
        thread_cpu_now().saturating_sub(start)
    }
    fn add(&self, a: &Duration, b: &Duration) -> Duration {
        *a + *b
    }
    fn zero(&self) -> Duration {
        Duration::ZERO
    }
    fn to_f64(&self, v: &Duration) -> f64 {
        v.as_nanos() as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        self.wall.formatter()
    }
}

fn run<M: Measurement>(mut c: Criterion<M>) {
    encode(&mut c);
    decode(&mut c);
    partition(&mut c);
    c.final_summary();
}

fn main() {
    let c = Criterion::default().configure_from_args();
    if std::env::var_os("KRABKA_BENCH_CPU_TIME").is_some_and(|v| v == "1") {
        run(c.with_measurement(ThreadCpuTime { wall: WallTime }));
    } else {
        run(c);
    }
}
