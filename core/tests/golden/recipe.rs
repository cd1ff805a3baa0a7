//! The recipe of the golden vectors: which values the files hold, and their
//! expected bytes as this crate produces them.
//!
//! Everything here is deterministic (fixed lists, and a fixed-seed generator for
//! the partition roles), so `KRABKA_GOLDEN_WRITE=1` rewrites the same files on
//! every machine, and the golden test can rebuild them in memory and compare.

use krabka_coordination::codec::{
    encode_key, encode_lease, encode_registration, Key, Lease, Registration,
};
use krabka_coordination::{
    murmur2, role_partition, FencingToken, KeyKind, Part, MAX_STRING_LEN, NO_EPOCH,
};
use serde::Serialize;

use super::hex;

/// The `format` number of all three files.
pub const FORMAT: u32 = 1;

/// The partition counts every partition role is checked against.
pub const PARTITION_COUNTS: [i32; 5] = [1, 3, 16, 50, 1000];

// ------------------------------------------------------------------ records

/// One valid case of `records.json`, in the file's field order.
#[derive(Serialize)]
#[serde(untagged)]
pub enum RecordCase {
    /// A key.
    Key {
        name: String,
        part: &'static str,
        kind: &'static str,
        role: String,
        member: String,
        hex: String,
    },
    /// A registration value.
    Registration {
        name: String,
        part: &'static str,
        member: String,
        registered_at: String,
        hex: String,
    },
    /// A lease value.
    Lease {
        name: String,
        part: &'static str,
        member: String,
        producer_id: String,
        producer_epoch: i16,
        granted_at: String,
        deadline: String,
        hex: String,
    },
}

/// One malformed entry of `records.json`.
#[derive(Serialize)]
pub struct Malformed {
    pub name: String,
    pub part: &'static str,
    pub hex: String,
}

fn key_case(name: &str, key: Key) -> RecordCase {
    let bytes = encode_key(&key).unwrap_or_else(|e| panic!("golden key {name:?}: {e}"));
    RecordCase::Key {
        name: name.to_owned(),
        part: Part::Key.as_str(),
        kind: key.kind.as_str(),
        role: key.role,
        member: key.member,
        hex: hex::encode(&bytes),
    }
}

fn registration_case(name: &str, member: &str, registered_at: i64) -> RecordCase {
    let reg = Registration {
        member: member.to_owned(),
        registered_at,
    };
    let bytes =
        encode_registration(&reg).unwrap_or_else(|e| panic!("golden registration {name:?}: {e}"));
    RecordCase::Registration {
        name: name.to_owned(),
        part: Part::RegistrationValue.as_str(),
        member: reg.member,
        registered_at: registered_at.to_string(),
        hex: hex::encode(&bytes),
    }
}

fn lease_case(
    name: &str,
    member: &str,
    token: FencingToken,
    granted_at: i64,
    deadline: i64,
) -> RecordCase {
    let lease = Lease {
        member: member.to_owned(),
        token,
        granted_at,
        deadline,
    };
    let bytes = encode_lease(&lease).unwrap_or_else(|e| panic!("golden lease {name:?}: {e}"));
    RecordCase::Lease {
        name: name.to_owned(),
        part: Part::LeaseValue.as_str(),
        member: lease.member,
        producer_id: token.producer_id.to_string(),
        producer_epoch: token.producer_epoch,
        granted_at: granted_at.to_string(),
        deadline: deadline.to_string(),
        hex: hex::encode(&bytes),
    }
}

/// `unit` repeated and then padded with `pad` to exactly `len` bytes.
pub fn fill(unit: &str, pad: &str, len: usize) -> String {
    let mut s = unit.repeat(len / unit.len());
    while s.len() < len {
        s.push_str(pad);
    }
    assert_eq!(s.len(), len, "fill({unit:?}, {pad:?}, {len})");
    s
}

/// The 32767-byte strings: ASCII, two-, three- and four-byte UTF-8.
pub fn max_strings() -> [String; 4] {
    [
        fill("x", "x", MAX_STRING_LEN),
        fill("é", "a", MAX_STRING_LEN),
        fill("€", "a", MAX_STRING_LEN),
        fill("🦀", "a", MAX_STRING_LEN),
    ]
}

/// The valid cases, in file order.
pub fn record_cases() -> Vec<RecordCase> {
    let [max_ascii, max_2, max_3, max_4] = max_strings();
    const T0: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z in epoch milliseconds
    let pattern = FencingToken::new(0x0102_0304_0506_0708, 0x0a0b);
    vec![
        // Keys.
        key_case("registration key", Key::registration("orders", "node-1")),
        key_case("lease key", Key::lease("orders")),
        key_case(
            "registration key of one-byte strings",
            Key::registration("r", "m"),
        ),
        key_case("lease key of a one-byte role", Key::lease("r")),
        key_case(
            "registration key, two-byte utf-8",
            Key::registration("rôle-ü", "mémber-ß"),
        ),
        key_case(
            "registration key, three-byte utf-8",
            Key::registration("ロール", "成员-一"),
        ),
        key_case(
            "registration key, emoji",
            Key::registration("🦀-leader", "👩‍💻 node 🚀"),
        ),
        key_case("lease key, emoji role", Key::lease("🔒🦀")),
        key_case("lease key, mixed utf-8 role", Key::lease("Zürich/東京/🦀")),
        key_case(
            "registration key, control characters",
            Key::registration("tab\there", "nul\0byte\nline"),
        ),
        key_case(
            "registration key, role of 32767 ascii bytes",
            Key::registration(max_ascii.as_str(), "m"),
        ),
        key_case(
            "lease key, role of 32767 bytes of three-byte utf-8",
            Key::lease(max_3.as_str()),
        ),
        key_case(
            "registration key, member of 32767 bytes of emoji",
            Key::registration("r", max_4.as_str()),
        ),
        // Registration values.
        registration_case("registration value", "node-1", T0),
        registration_case("registration value at time zero", "node-1", 0),
        registration_case("registration value at time -1", "node-1", -1),
        registration_case("registration value at i64 min", "node-1", i64::MIN),
        registration_case("registration value at i64 max", "node-1", i64::MAX),
        registration_case(
            "registration value, byte pattern",
            "m",
            0x0102_0304_0506_0708,
        ),
        registration_case("registration value, emoji member", "👩‍💻 node 🚀", T0),
        registration_case(
            "registration value, member of 32767 bytes of two-byte utf-8",
            &max_2,
            T0,
        ),
        // Lease values.
        lease_case(
            "lease value",
            "node-1",
            FencingToken::new(4001, 7),
            T0,
            T0 + 30_000,
        ),
        lease_case("lease value, no epoch", "node-1", NO_EPOCH, T0, T0),
        lease_case(
            "lease value, epoch zero",
            "node-1",
            FencingToken::new(0, 0),
            0,
            0,
        ),
        lease_case(
            "lease value, exhausted epoch",
            "node-1",
            FencingToken::new(7, 32766),
            T0,
            T0 + 1,
        ),
        lease_case(
            "lease value, rotated producer id",
            "node-2",
            FencingToken::new(8, 0),
            T0 + 1,
            T0 + 30_001,
        ),
        lease_case(
            "lease value, maxima",
            "node-1",
            FencingToken::new(i64::MAX, i16::MAX),
            i64::MAX,
            i64::MAX,
        ),
        lease_case(
            "lease value, minima",
            "node-1",
            FencingToken::new(i64::MIN, i16::MIN),
            i64::MIN,
            i64::MIN,
        ),
        lease_case(
            "lease value, negative producer id and epoch",
            "m",
            FencingToken::new(-4242, -2),
            -1,
            -30_000,
        ),
        lease_case(
            "lease value, deadline before granted_at",
            "m",
            FencingToken::new(5, 1),
            T0,
            T0 - 1,
        ),
        lease_case(
            "lease value, byte pattern",
            "m",
            pattern,
            0x1112_1314_1516_1718,
            0x2122_2324_2526_2728,
        ),
        lease_case(
            "lease value, high bits",
            "m",
            FencingToken::new(-0x7f00_0000_0000_0001, -0x7f01),
            -2,
            -256,
        ),
        lease_case(
            "lease value, mixed utf-8 member",
            "Zürich/東京/🦀",
            FencingToken::new(1, 1),
            T0,
            T0 + 5,
        ),
        lease_case(
            "lease value, member of 32767 bytes of three-byte utf-8",
            &max_3,
            FencingToken::new(4001, 7),
            T0,
            T0 + 30_000,
        ),
    ]
}

// ---------------------------------------------------------------- malformed

fn be16(v: i16) -> Vec<u8> {
    v.to_be_bytes().to_vec()
}

fn string_bytes(s: &[u8]) -> Vec<u8> {
    let mut v = be16(s.len() as i16);
    v.extend_from_slice(s);
    v
}

fn key_bytes(version: i16, kind: i16, role: &[u8], member: &[u8]) -> Vec<u8> {
    [
        be16(version),
        be16(kind),
        string_bytes(role),
        string_bytes(member),
    ]
    .concat()
}

fn registration_bytes(version: i16, member: &[u8], registered_at: i64) -> Vec<u8> {
    [
        be16(version),
        string_bytes(member),
        registered_at.to_be_bytes().to_vec(),
    ]
    .concat()
}

fn lease_bytes(
    version: i16,
    member: &[u8],
    token: (i64, i16),
    granted_at: i64,
    deadline: i64,
) -> Vec<u8> {
    [
        be16(version),
        string_bytes(member),
        token.0.to_be_bytes().to_vec(),
        token.1.to_be_bytes().to_vec(),
        granted_at.to_be_bytes().to_vec(),
        deadline.to_be_bytes().to_vec(),
    ]
    .concat()
}

fn plus(mut v: Vec<u8>, extra: &[u8]) -> Vec<u8> {
    v.extend_from_slice(extra);
    v
}

fn cut(v: Vec<u8>, len: usize) -> Vec<u8> {
    assert!(len < v.len());
    v[..len].to_vec()
}

/// The malformed entries, in file order. Each names the one failure it holds;
/// the bytes are built by hand, not by the encoder.
pub fn malformed() -> Vec<Malformed> {
    let k = Part::Key.as_str();
    let r = Part::RegistrationValue.as_str();
    let l = Part::LeaseValue.as_str();
    let good_key = key_bytes(0, 0, b"orders", b"node-1");
    let good_reg = registration_bytes(0, b"node-1", 1_767_225_600_000);
    let good_lease = lease_bytes(
        0,
        b"node-1",
        (4001, 7),
        1_767_225_600_000,
        1_767_225_630_000,
    );
    let cases: Vec<(&str, &str, Vec<u8>)> = vec![
        // Keys, in the order of the checks.
        ("key: empty input, too short for the version", k, vec![]),
        ("key: one byte, too short for the version", k, vec![0]),
        ("key: version 1", k, key_bytes(1, 0, b"orders", b"node-1")),
        ("key: version -1", k, key_bytes(-1, 0, b"orders", b"node-1")),
        (
            "key: version 256 (bytes 01 00, not little-endian 1)",
            k,
            plus(vec![1, 0, 0, 0], &good_key[4..]),
        ),
        ("key: too short for the kind", k, vec![0, 0, 0]),
        ("key: kind 2", k, key_bytes(0, 2, b"orders", b"node-1")),
        ("key: kind -1", k, key_bytes(0, -1, b"orders", b"")),
        (
            "key: kind 256 (bytes 01 00, not little-endian 1)",
            k,
            key_bytes(0, 256, b"orders", b""),
        ),
        ("key: too short for the role length", k, vec![0, 0, 0, 1, 0]),
        (
            "key: negative role length -1",
            k,
            plus(vec![0, 0, 0, 1, 0xff, 0xff], b"orders\0\0"),
        ),
        (
            "key: negative role length -32768",
            k,
            plus(vec![0, 0, 0, 0, 0x80, 0x00], &[0; 8]),
        ),
        (
            "key: role shorter than its length",
            k,
            plus(vec![0, 0, 0, 1, 0, 7], b"orders"),
        ),
        (
            "key: role length 256 (bytes 01 00) past the end",
            k,
            plus(vec![0, 0, 0, 1, 1, 0], b"r\0\0"),
        ),
        (
            "key: role is not utf-8 (byte ff)",
            k,
            key_bytes(0, 1, b"ord\xffers", b""),
        ),
        (
            "key: role is overlong utf-8 (c0 af)",
            k,
            key_bytes(0, 1, b"\xc0\xaf", b""),
        ),
        (
            "key: role is a utf-8 surrogate (ed a0 80)",
            k,
            key_bytes(0, 1, b"\xed\xa0\x80", b""),
        ),
        (
            "key: role ends inside a utf-8 sequence (e2 82)",
            k,
            key_bytes(0, 0, b"role\xe2\x82", b"m"),
        ),
        (
            "key: role above U+10FFFF (f4 90 80 80)",
            k,
            key_bytes(0, 0, b"\xf4\x90\x80\x80", b"m"),
        ),
        ("key: empty role", k, key_bytes(0, 1, b"", b"")),
        (
            "key: too short for the member length",
            k,
            plus(vec![0, 0, 0, 0], &string_bytes(b"orders")),
        ),
        (
            "key: one byte of the member length",
            k,
            plus(plus(vec![0, 0, 0, 1], &string_bytes(b"r")), &[0]),
        ),
        (
            "key: negative member length",
            k,
            plus(plus(vec![0, 0, 0, 0], &string_bytes(b"r")), &[0xff, 0xff]),
        ),
        (
            "key: member shorter than its length",
            k,
            cut(good_key.clone(), good_key.len() - 1),
        ),
        (
            "key: member is not utf-8 (byte 80)",
            k,
            key_bytes(0, 0, b"orders", b"node\x80"),
        ),
        (
            "key: registration key with an empty member",
            k,
            key_bytes(0, 0, b"orders", b""),
        ),
        (
            "key: lease key whose member is not empty",
            k,
            key_bytes(0, 1, b"orders", b"node-1"),
        ),
        (
            "key: lease key whose member is one space",
            k,
            key_bytes(0, 1, b"orders", b" "),
        ),
        (
            "key: one trailing byte after a lease key",
            k,
            plus(key_bytes(0, 1, b"orders", b""), &[0]),
        ),
        (
            "key: trailing bytes after a registration key",
            k,
            plus(good_key.clone(), b"\0\0\0\0"),
        ),
        (
            "key: a registration value is not a key",
            k,
            good_reg.clone(),
        ),
        // Registration values.
        (
            "registration value: empty input (a tombstone is not a value)",
            r,
            vec![],
        ),
        (
            "registration value: one byte, too short for the version",
            r,
            vec![0],
        ),
        (
            "registration value: version 1",
            r,
            registration_bytes(1, b"node-1", 0),
        ),
        (
            "registration value: version -32768",
            r,
            registration_bytes(i16::MIN, b"node-1", 0),
        ),
        (
            "registration value: too short for the member length",
            r,
            vec![0, 0, 0],
        ),
        (
            "registration value: negative member length",
            r,
            plus(vec![0, 0, 0xff, 0xf0], &[0; 8]),
        ),
        (
            "registration value: member shorter than its length",
            r,
            plus(vec![0, 0, 0, 9], b"node-1"),
        ),
        (
            "registration value: member is not utf-8 (byte fe)",
            r,
            registration_bytes(0, b"\xfenode", 0),
        ),
        (
            "registration value: empty member",
            r,
            registration_bytes(0, b"", 1_767_225_600_000),
        ),
        (
            "registration value: too short for registered_at",
            r,
            cut(good_reg.clone(), good_reg.len() - 1),
        ),
        (
            "registration value: registered_at missing",
            r,
            plus(vec![0, 0], &string_bytes(b"node-1")),
        ),
        (
            "registration value: one trailing byte",
            r,
            plus(good_reg.clone(), &[0]),
        ),
        (
            "registration value: a lease value is not a registration value",
            r,
            good_lease.clone(),
        ),
        // Lease values.
        (
            "lease value: empty input (a tombstone is not a value)",
            l,
            vec![],
        ),
        (
            "lease value: version 2",
            l,
            lease_bytes(2, b"node-1", (4001, 7), 0, 0),
        ),
        (
            "lease value: version 256 (bytes 01 00)",
            l,
            plus(vec![1, 0], &good_lease[2..]),
        ),
        (
            "lease value: too short for the member length",
            l,
            vec![0, 0],
        ),
        (
            "lease value: negative member length",
            l,
            plus(vec![0, 0, 0x80, 0x01], &good_lease[10..]),
        ),
        (
            "lease value: member shorter than its length",
            l,
            vec![0, 0, 0, 6, b'n', b'o'],
        ),
        (
            "lease value: member is not utf-8 (lone continuation byte bf)",
            l,
            lease_bytes(0, b"\xbf", (1, 1), 0, 0),
        ),
        (
            "lease value: empty member",
            l,
            lease_bytes(0, b"", (4001, 7), 0, 0),
        ),
        (
            "lease value: too short for producer_id",
            l,
            cut(good_lease.clone(), 2 + 8 + 7),
        ),
        (
            "lease value: too short for producer_epoch",
            l,
            cut(good_lease.clone(), 2 + 8 + 8 + 1),
        ),
        (
            "lease value: too short for granted_at",
            l,
            cut(good_lease.clone(), 2 + 8 + 8 + 2 + 4),
        ),
        (
            "lease value: too short for deadline",
            l,
            cut(good_lease.clone(), good_lease.len() - 1),
        ),
        (
            "lease value: one trailing byte",
            l,
            plus(good_lease.clone(), &[0]),
        ),
        (
            "lease value: eight trailing bytes",
            l,
            plus(good_lease.clone(), &[0xff; 8]),
        ),
        (
            "lease value: a registration value is not a lease value",
            l,
            good_reg.clone(),
        ),
    ];
    cases
        .into_iter()
        .map(|(name, part, bytes)| Malformed {
            name: name.to_owned(),
            part,
            hex: hex::encode(&bytes),
        })
        .collect()
}

// --------------------------------------------------------------- partitions

/// One case of `partitions.json`.
#[derive(Serialize)]
pub struct PartitionCase {
    pub role: String,
    pub murmur2: i32,
    pub partitions: i32,
    pub partition: i32,
}

/// splitmix64: a fixed-seed generator, so the roles are the same everywhere.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const ASCII: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:";
const WIDE: [char; 12] = [
    'é', 'ß', 'ж', 'ü', '€', 'ロ', '中', '한', '🦀', '😀', '𝄞', '👍',
];

/// A role of exactly `len` UTF-8 bytes; with `wide` it starts with a
/// multi-byte character (when `len` allows) and mixes them in.
fn generated_role(rng: &mut SplitMix, len: usize, wide: bool) -> String {
    let mut s = String::with_capacity(len);
    while s.len() < len {
        let room = len - s.len();
        let c = WIDE[rng.below(WIDE.len())];
        let want_wide = wide && (s.is_empty() || rng.below(2) == 0);
        if want_wide && c.len_utf8() <= room {
            s.push(c);
        } else {
            s.push(ASCII[rng.below(ASCII.len())] as char);
        }
    }
    s
}

// The inverse of murmur2 on eight-byte inputs, to make roles whose hash is a
// chosen edge value (i32::MIN above all: Java's Math.abs of it is negative).

const M: u32 = 0x5bd1_e995;
const SEED: u32 = 0x9747_b28c;

fn inverse_of_odd(a: u32) -> u32 {
    let mut x = a; // Newton's iteration doubles the correct low bits each round.
    for _ in 0..5 {
        x = x.wrapping_mul(2u32.wrapping_sub(a.wrapping_mul(x)));
    }
    assert_eq!(a.wrapping_mul(x), 1);
    x
}

fn unshift(y: u32, s: u32) -> u32 {
    let mut x = 0;
    let mut i = 0;
    while i < 32 {
        x ^= y >> i;
        i += s;
    }
    x
}

fn mix_block(k: u32) -> u32 {
    let k = k.wrapping_mul(M);
    (k ^ (k >> 24)).wrapping_mul(M)
}

/// An eight-byte role of the characters `[A-Za-z0-9_-]` whose murmur2 is `target`.
fn role_with_hash(target: i32) -> String {
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_";
    let m_inv = inverse_of_odd(M);
    // Undo the final avalanche: h ^= h >> 13; h *= M; h ^= h >> 15.
    let h2 = unshift(unshift(target as u32, 15).wrapping_mul(m_inv), 13);
    for counter in 0u32.. {
        let mut prefix = [0u8; 4];
        let mut c = counter;
        for b in &mut prefix {
            *b = CHARS[(c % CHARS.len() as u32) as usize];
            c /= CHARS.len() as u32;
        }
        let h1 = (SEED ^ 8).wrapping_mul(M) ^ mix_block(u32::from_le_bytes(prefix));
        // h2 = h1 * M ^ mix(k2), so mix(k2) is known; undo mix.
        let mixed = h2 ^ h1.wrapping_mul(M);
        let k2 = unshift(mixed.wrapping_mul(m_inv), 24).wrapping_mul(m_inv);
        let suffix = k2.to_le_bytes();
        if suffix.iter().all(|b| CHARS.contains(b)) {
            let role: String = prefix.iter().chain(&suffix).map(|&b| b as char).collect();
            assert_eq!(murmur2(role.as_bytes()), target, "{role}");
            return role;
        }
    }
    unreachable!("the counter space is larger than any search needs")
}

/// The hashes with a role made for them.
pub const EDGE_HASHES: [i32; 6] = [i32::MIN, i32::MIN + 1, -1, 0, 1, i32::MAX];

/// The roles of `partitions.json`, in file order: named roles, roles with
/// edge hashes, then generated ASCII and non-ASCII roles of every length 1..=64.
pub fn partition_roles() -> Vec<String> {
    let mut roles: Vec<String> = [
        // The strings of Kafka's UtilsTest.testMurmur2.
        "21",
        "foobar",
        "a-little-bit-long-string",
        "a-little-bit-longer-string",
        "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
        "abc",
        // Role-like names.
        "orders",
        "payments/eu-west-1",
        "billing.invoice-writer",
        "rôle",
        "ロール",
        "🦀",
        "leader🦀election",
        "Zürich/東京/🦀",
        "tab\there",
        "space in role",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    roles.extend(EDGE_HASHES.iter().map(|&h| role_with_hash(h)));
    let mut rng = SplitMix(0x6b72_6162_6b61_0001);
    for len in 1..=64 {
        roles.push(generated_role(&mut rng, len, false));
        roles.push(generated_role(&mut rng, len, false));
        roles.push(generated_role(&mut rng, len, true));
    }
    let mut seen = std::collections::HashSet::new();
    for r in &roles {
        assert!(seen.insert(r.as_str()), "duplicate partition role {r:?}");
    }
    roles
}

/// The cases of `partitions.json`: every role against every count.
pub fn partition_cases() -> Vec<PartitionCase> {
    let mut cases = Vec::new();
    for role in partition_roles() {
        let h = murmur2(role.as_bytes());
        for n in PARTITION_COUNTS {
            let partition = role_partition(&role, n).expect("valid role and count");
            cases.push(PartitionCase {
                role: role.clone(),
                murmur2: h,
                partitions: n,
                partition,
            });
        }
    }
    cases
}

// ------------------------------------------------------------------- tokens

/// A token as the files spell it.
#[derive(Serialize)]
pub struct TokenJson {
    pub producer_id: String,
    pub producer_epoch: i16,
}

/// One case of `tokens.json`.
#[derive(Serialize)]
pub struct TokenCase {
    pub a: TokenJson,
    pub b: TokenJson,
    pub order: &'static str,
}

fn token_json(t: FencingToken) -> TokenJson {
    TokenJson {
        producer_id: t.producer_id.to_string(),
        producer_epoch: t.producer_epoch,
    }
}

/// The tokens of the cross product.
pub fn tokens() -> Vec<FencingToken> {
    let t = FencingToken::new;
    vec![
        NO_EPOCH,
        t(0, 0),
        t(0, 1),
        t(0, 32766),
        t(0, i16::MAX),
        t(7, 32766),
        t(8, 0),
        t(4001, 7),
        t(-1, 0),
        t(-2, 5),
        t(-4242, i16::MIN),
        t(i64::MIN, i16::MIN),
        t(i64::MIN, i16::MAX),
        t(i64::MAX, i16::MIN),
        t(i64::MAX, i16::MAX),
        t(0x7fff_ffff_ffff, -1),
    ]
}

/// The cases of `tokens.json`: the named situations, then every ordered pair of [`tokens`].
pub fn token_cases() -> Vec<TokenCase> {
    let t = FencingToken::new;
    let mut pairs = vec![
        // Producer-id rotation: a new id at epoch 0 outranks the old id at 32766.
        (t(8, 0), t(7, 32766)),
        (t(7, 32766), t(8, 0)),
        (t(1, 0), t(0, i16::MAX)),
        // Equal tokens.
        (t(4001, 7), t(4001, 7)),
        (NO_EPOCH, NO_EPOCH),
        // NoEpoch ranks below every minted token.
        (NO_EPOCH, t(0, 0)),
        (t(0, 0), NO_EPOCH),
        (NO_EPOCH, t(i64::MAX, i16::MAX)),
        (NO_EPOCH, t(-1, 0)),
        // Negative ids order as signed integers.
        (t(-2, i16::MAX), t(-1, -1)),
        (t(-1, -2), NO_EPOCH),
        (t(i64::MIN, i16::MAX), t(i64::MIN + 1, i16::MIN)),
    ];
    let all = tokens();
    for &a in &all {
        for &b in &all {
            pairs.push((a, b));
        }
    }
    pairs
        .into_iter()
        .map(|(a, b)| TokenCase {
            a: token_json(a),
            b: token_json(b),
            order: match a.cmp(&b) {
                std::cmp::Ordering::Less => "less",
                std::cmp::Ordering::Equal => "equal",
                std::cmp::Ordering::Greater => "greater",
            },
        })
        .collect()
}

// ------------------------------------------------------------------ writing

/// A file of `format` and named arrays, one compact JSON object per line.
fn render(sections: &[(&str, Vec<String>)]) -> String {
    let mut out = format!("{{\n  \"format\": {FORMAT}");
    for (name, items) in sections {
        out.push_str(&format!(",\n  \"{name}\": ["));
        for (i, item) in items.iter().enumerate() {
            out.push_str(if i == 0 { "\n    " } else { ",\n    " });
            out.push_str(item);
        }
        out.push_str(if items.is_empty() { "]" } else { "\n  ]" });
    }
    out.push_str("\n}\n");
    out
}

fn lines<T: Serialize>(items: &[T]) -> Vec<String> {
    items
        .iter()
        .map(|c| serde_json::to_string(c).expect("serialisable"))
        .collect()
}

/// The expected `records.json`.
pub fn records_json() -> String {
    render(&[
        ("cases", lines(&record_cases())),
        ("malformed", lines(&malformed())),
    ])
}

/// The expected `partitions.json`.
pub fn partitions_json() -> String {
    render(&[("cases", lines(&partition_cases()))])
}

/// The expected `tokens.json`.
pub fn tokens_json() -> String {
    render(&[("cases", lines(&token_cases()))])
}

/// The kind name of a key case, for readers.
pub fn kind_of(name: &str) -> Option<KeyKind> {
    match name {
        "registration" => Some(KeyKind::Registration),
        "lease" => Some(KeyKind::Lease),
        _ => None,
    }
}
