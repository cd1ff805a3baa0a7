//! The golden vectors in `golden/` against this crate.
//!
//! * `golden_files_match_the_core` rebuilds the three files in memory from the
//!   recipe (`golden/recipe.rs`) and the core, and fails when a file differs.
//!   With `KRABKA_GOLDEN_WRITE=1` it writes them instead (`ci/golden.sh --write`).
//! * The other tests read the files as another port would, decode or compute
//!   every case, assert every field, count that every case ran, and assert the
//!   coverage the files promise (edge values, 32767-byte strings, every kind of
//!   malformed input, negative hashes where the mask and `abs` disagree).

#[path = "golden/hex.rs"]
mod hex;
#[path = "golden/recipe.rs"]
mod recipe;

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use krabka_coordination::codec::{
    decode_key, decode_lease, decode_registration, encode_key, encode_lease, encode_registration,
};
use krabka_coordination::{
    murmur2, role_partition, FencingToken, FormatError, Key, Lease, Part, Registration,
    MAX_STRING_LEN, NO_EPOCH,
};
use serde_json::{Map, Value};

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("golden")
}

fn read(name: &str) -> String {
    let path = golden_dir().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "reading {}: {e} (regenerate with ci/golden.sh --write)",
            path.display()
        )
    })
}

fn parse(name: &str) -> Map<String, Value> {
    match serde_json::from_str::<Value>(&read(name)) {
        Ok(Value::Object(m)) => {
            assert_eq!(
                m.get("format"),
                Some(&Value::from(1)),
                "{name}: format must be 1"
            );
            m
        }
        Ok(other) => panic!("{name}: top level is not an object: {other:.60}"),
        Err(e) => panic!("{name}: not JSON: {e}"),
    }
}

fn array<'a>(file: &'a Map<String, Value>, name: &str) -> &'a Vec<Value> {
    file.get(name)
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("no array {name:?}"))
}

/// One JSON object of a case, read strictly: exactly the expected keys, i64 as
/// strings of decimal digits, i16 and i32 as numbers.
struct Obj<'a> {
    m: &'a Map<String, Value>,
    what: String,
}

impl<'a> Obj<'a> {
    fn new(v: &'a Value, what: String, keys: &[&str]) -> Self {
        let m = v
            .as_object()
            .unwrap_or_else(|| panic!("{what}: not an object"));
        let have: BTreeSet<&str> = m.keys().map(String::as_str).collect();
        let want: BTreeSet<&str> = keys.iter().copied().collect();
        assert_eq!(have, want, "{what}: keys");
        Obj { m, what }
    }

    fn str(&self, k: &str) -> &'a str {
        self.m[k]
            .as_str()
            .unwrap_or_else(|| panic!("{}: {k} is not a string", self.what))
    }

    fn i64(&self, k: &str) -> i64 {
        let s = self.str(k);
        let digits = s.strip_prefix('-').unwrap_or(s);
        assert!(
            !digits.is_empty()
                && digits.bytes().all(|b| b.is_ascii_digit())
                && (digits == "0" || !digits.starts_with('0')),
            "{}: {k} = {s:?} is not a decimal i64 string",
            self.what
        );
        assert_ne!(s, "-0", "{}: {k}", self.what);
        s.parse()
            .unwrap_or_else(|e| panic!("{}: {k} = {s:?}: {e}", self.what))
    }

    fn int(&self, k: &str) -> i64 {
        self.m[k]
            .as_i64()
            .unwrap_or_else(|| panic!("{}: {k} is not an integer number", self.what))
    }

    fn i16(&self, k: &str) -> i16 {
        i16::try_from(self.int(k))
            .unwrap_or_else(|_| panic!("{}: {k} is out of i16 range", self.what))
    }

    fn i32(&self, k: &str) -> i32 {
        i32::try_from(self.int(k))
            .unwrap_or_else(|_| panic!("{}: {k} is out of i32 range", self.what))
    }

    fn hex(&self) -> Vec<u8> {
        hex::decode(self.str("hex")).unwrap_or_else(|e| panic!("{}: hex: {e}", self.what))
    }
}

/// The first line where `have` and `want` differ, shortened.
fn first_difference(have: &str, want: &str) -> String {
    let short = |s: &str| s.chars().take(200).collect::<String>();
    for (i, (h, w)) in have.lines().zip(want.lines()).enumerate() {
        if h != w {
            return format!(
                "line {}:\n  file: {}\n  core: {}",
                i + 1,
                short(h),
                short(w)
            );
        }
    }
    format!(
        "line counts differ: file {}, core {}",
        have.lines().count(),
        want.lines().count()
    )
}

#[test]
fn golden_files_match_the_core() {
    let files = [
        ("records.json", recipe::records_json()),
        ("partitions.json", recipe::partitions_json()),
        ("tokens.json", recipe::tokens_json()),
    ];
    if std::env::var_os("KRABKA_GOLDEN_WRITE").is_some_and(|v| v == "1") {
        for (name, want) in &files {
            let path = golden_dir().join(name);
            let tmp = path.with_extension("json.tmp");
            std::fs::write(&tmp, want).unwrap();
            std::fs::rename(&tmp, &path).unwrap();
            eprintln!("wrote {}", path.display());
        }
        return;
    }
    let mut stale = Vec::new();
    for (name, want) in &files {
        let have = read(name);
        if &have != want {
            stale.push(format!(
                "golden/{name} differs from the core at {}",
                first_difference(&have, want)
            ));
        }
    }
    assert!(
        stale.is_empty(),
        "{}\nThe files are the cross-port contract: if the change is intended, it is a breaking change; \
         regenerate with ci/golden.sh --write and change the other ports alike.",
        stale.join("\n")
    );
}

// ------------------------------------------------------------------ records

fn decode_part(part: Part, bytes: &[u8]) -> Result<(), FormatError> {
    match part {
        Part::Key => decode_key(bytes).map(drop),
        Part::RegistrationValue => decode_registration(bytes).map(drop),
        Part::LeaseValue => decode_lease(bytes).map(drop),
    }
}

fn note(seen: &mut BTreeSet<String>, what: &str) {
    seen.insert(what.to_owned());
}

fn note_str(seen: &mut BTreeSet<String>, field: &str, s: &str) {
    if s.len() == MAX_STRING_LEN {
        note(seen, &format!("{field} of 32767 bytes"));
    }
    for c in s.chars() {
        note(seen, &format!("{field} with {}-byte utf-8", c.len_utf8()));
    }
}

#[test]
fn record_cases_decode_field_by_field_and_encode_to_their_bytes() {
    let file = parse("records.json");
    let cases = array(&file, "cases");
    let mut ran = 0;
    // What the cases cover, to assert below.
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut edges = BTreeMap::<&str, BTreeSet<i64>>::new();
    for (i, v) in cases.iter().enumerate() {
        let part = v.get("part").and_then(Value::as_str).unwrap_or_default();
        let name = v.get("name").and_then(Value::as_str).unwrap_or_default();
        let what = format!("records.json case {i} ({name})");
        match Part::from_name(part) {
            Some(Part::Key) => {
                let o = Obj::new(v, what, &["name", "part", "kind", "role", "member", "hex"]);
                let kind =
                    recipe::kind_of(o.str("kind")).unwrap_or_else(|| panic!("{}: kind", o.what));
                let want = Key {
                    kind,
                    role: o.str("role").to_owned(),
                    member: o.str("member").to_owned(),
                };
                let got = decode_key(&o.hex()).unwrap_or_else(|e| panic!("{}: {e}", o.what));
                assert_eq!(got.kind, want.kind, "{}: kind", o.what);
                assert_eq!(got.role, want.role, "{}: role", o.what);
                assert_eq!(got.member, want.member, "{}: member", o.what);
                assert_eq!(encode_key(&want).unwrap(), o.hex(), "{}: encoding", o.what);
                note(&mut seen, &format!("{} key", kind.as_str()));
                note_str(&mut seen, "role", &want.role);
                note_str(&mut seen, "key member", &want.member);
            }
            Some(Part::RegistrationValue) => {
                let o = Obj::new(v, what, &["name", "part", "member", "registered_at", "hex"]);
                let want = Registration {
                    member: o.str("member").to_owned(),
                    registered_at: o.i64("registered_at"),
                };
                let got =
                    decode_registration(&o.hex()).unwrap_or_else(|e| panic!("{}: {e}", o.what));
                assert_eq!(got.member, want.member, "{}: member", o.what);
                assert_eq!(
                    got.registered_at, want.registered_at,
                    "{}: registered_at",
                    o.what
                );
                assert_eq!(
                    encode_registration(&want).unwrap(),
                    o.hex(),
                    "{}: encoding",
                    o.what
                );
                note(&mut seen, "registration value");
                note_str(&mut seen, "registration member", &want.member);
                edges
                    .entry("registered_at")
                    .or_default()
                    .insert(want.registered_at);
            }
            Some(Part::LeaseValue) => {
                let o = Obj::new(
                    v,
                    what,
                    &[
                        "name",
                        "part",
                        "member",
                        "producer_id",
                        "producer_epoch",
                        "granted_at",
                        "deadline",
                        "hex",
                    ],
                );
                let want = Lease {
                    member: o.str("member").to_owned(),
                    token: FencingToken::new(o.i64("producer_id"), o.i16("producer_epoch")),
                    granted_at: o.i64("granted_at"),
                    deadline: o.i64("deadline"),
                };
                let got = decode_lease(&o.hex()).unwrap_or_else(|e| panic!("{}: {e}", o.what));
                assert_eq!(got.member, want.member, "{}: member", o.what);
                assert_eq!(
                    got.token.producer_id, want.token.producer_id,
                    "{}: producer_id",
                    o.what
                );
                assert_eq!(
                    got.token.producer_epoch, want.token.producer_epoch,
                    "{}: producer_epoch",
                    o.what
                );
                assert_eq!(got.granted_at, want.granted_at, "{}: granted_at", o.what);
                assert_eq!(got.deadline, want.deadline, "{}: deadline", o.what);
                assert_eq!(
                    encode_lease(&want).unwrap(),
                    o.hex(),
                    "{}: encoding",
                    o.what
                );
                note(&mut seen, "lease value");
                note_str(&mut seen, "lease member", &want.member);
                edges
                    .entry("producer_id")
                    .or_default()
                    .insert(want.token.producer_id);
                edges
                    .entry("producer_epoch")
                    .or_default()
                    .insert(want.token.producer_epoch.into());
                edges
                    .entry("granted_at")
                    .or_default()
                    .insert(want.granted_at);
                edges.entry("deadline").or_default().insert(want.deadline);
            }
            None => panic!("{what}: unknown part {part:?}"),
        }
        ran += 1;
    }
    assert_eq!(ran, cases.len());
    assert_eq!(
        ran,
        recipe::record_cases().len(),
        "the file and the recipe hold the same number of cases"
    );

    for want in [
        "registration key",
        "lease key",
        "registration value",
        "lease value",
        "role with 2-byte utf-8",
        "role with 3-byte utf-8",
        "role with 4-byte utf-8",
        "key member with 2-byte utf-8",
        "key member with 3-byte utf-8",
        "key member with 4-byte utf-8",
        "registration member with 4-byte utf-8",
        "lease member with 4-byte utf-8",
        "role of 32767 bytes",
        "key member of 32767 bytes",
        "registration member of 32767 bytes",
        "lease member of 32767 bytes",
    ] {
        assert!(seen.contains(want), "no case covers: {want}");
    }
    let (i64_min, i64_max) = (i64::MIN, i64::MAX);
    for field in ["registered_at", "producer_id", "granted_at", "deadline"] {
        let values = &edges[field];
        assert!(
            values.contains(&i64_min) && values.contains(&i64_max),
            "{field} lacks i64 min or max"
        );
    }
    let epochs = &edges["producer_epoch"];
    for e in [i16::MIN.into(), i16::MAX.into(), -1, 0, 32766] {
        assert!(epochs.contains(&e), "producer_epoch lacks {e}");
    }
    let ids = &edges["producer_id"];
    assert!(ids.contains(&-1), "no NoEpoch lease value");
    assert!(ids.iter().any(|&id| id < -1), "no producer id below -1");
}

/// What the Rust port reports, sorted into the failures the files must cover.
fn failure_class(e: &FormatError) -> &'static str {
    let m = e.message.as_str();
    [
        ("too short", "too short"),
        ("unsupported version", "version"),
        ("unknown kind", "kind"),
        ("negative", "negative length"),
        ("not valid UTF-8", "utf-8"),
        ("trailing bytes", "trailing bytes"),
        ("lease key with a non-empty member", "lease key member"),
        (
            "registration key with an empty member",
            "registration key member",
        ),
        ("key with an empty role", "empty role"),
        ("value with an empty member", "empty value member"),
    ]
    .into_iter()
    .find(|(needle, _)| m.contains(needle))
    .map(|(_, class)| class)
    .unwrap_or_else(|| panic!("unclassified failure: {e}"))
}

#[test]
fn malformed_records_fail_with_their_part() {
    let file = parse("records.json");
    let entries = array(&file, "malformed");
    let mut ran = 0;
    let mut classes = BTreeSet::new();
    let mut names = BTreeSet::new();
    for (i, v) in entries.iter().enumerate() {
        let o = Obj::new(
            v,
            format!("records.json malformed {i}"),
            &["name", "part", "hex"],
        );
        assert!(names.insert(o.str("name")), "{}: duplicate name", o.what);
        let part = Part::from_name(o.str("part"))
            .unwrap_or_else(|| panic!("{}: part {:?}", o.what, o.str("part")));
        let e = decode_part(part, &o.hex()).expect_err(&format!(
            "{} ({}) decoded",
            o.what,
            o.str("name")
        ));
        assert_eq!(e.part, part, "{} ({}): {e}", o.what, o.str("name"));
        assert!(!e.message.is_empty());
        classes.insert((part.as_str(), failure_class(&e)));
        ran += 1;
    }
    assert_eq!(ran, entries.len());
    assert_eq!(
        ran,
        recipe::malformed().len(),
        "the file and the recipe hold the same number of malformed entries"
    );
    assert!(ran >= 20, "only {ran} malformed entries");

    let mut want: Vec<(&str, &str)> = Vec::new();
    for part in [Part::Key, Part::RegistrationValue, Part::LeaseValue] {
        for class in [
            "too short",
            "version",
            "negative length",
            "utf-8",
            "trailing bytes",
        ] {
            want.push((part.as_str(), class));
        }
    }
    want.extend([
        ("key", "kind"),
        ("key", "empty role"),
        ("key", "lease key member"),
        ("key", "registration key member"),
        ("registration value", "empty value member"),
        ("lease value", "empty value member"),
    ]);
    for w in want {
        assert!(
            classes.contains(&w),
            "no malformed entry covers {w:?}; covered: {classes:?}"
        );
    }
}

// --------------------------------------------------------------- partitions

#[test]
fn partition_cases_match_murmur2_and_the_sign_mask() {
    let file = parse("partitions.json");
    let cases = array(&file, "cases");
    let mut ran = 0;
    let mut roles: BTreeMap<&str, BTreeSet<i32>> = BTreeMap::new();
    let mut mask_differs_from_abs = 0;
    for (i, v) in cases.iter().enumerate() {
        let o = Obj::new(
            v,
            format!("partitions.json case {i}"),
            &["role", "murmur2", "partitions", "partition"],
        );
        let role = o.str("role");
        let (h, n, p) = (o.i32("murmur2"), o.i32("partitions"), o.i32("partition"));
        assert_eq!(
            murmur2(role.as_bytes()),
            h,
            "{}: murmur2 of {role:?}",
            o.what
        );
        assert_eq!(
            role_partition(role, n).unwrap(),
            p,
            "{}: partition of {role:?} among {n}",
            o.what
        );
        // The rule itself, from the file's numbers alone.
        assert_eq!((h & 0x7fff_ffff) % n, p, "{}: toPositive(h) % n", o.what);
        assert!((0..n).contains(&p));
        // Java's Math.abs of i32::MIN is i32::MIN, so wrapping_abs mirrors the wrong rule.
        if h < 0 && h.wrapping_abs() % n != p {
            mask_differs_from_abs += 1;
        }
        assert!(
            roles.entry(role).or_default().insert(n),
            "{}: repeated",
            o.what
        );
        ran += 1;
    }
    assert_eq!(ran, cases.len());
    assert_eq!(
        ran,
        recipe::partition_cases().len(),
        "the file and the recipe hold the same number of cases"
    );

    assert!(roles.len() >= 200, "only {} roles", roles.len());
    for (role, counts) in &roles {
        assert_eq!(
            counts.iter().copied().collect::<Vec<_>>(),
            recipe::PARTITION_COUNTS,
            "{role:?}: counts"
        );
    }
    let lengths: BTreeSet<usize> = roles.keys().map(|r| r.len()).collect();
    for len in 1..=64 {
        assert!(lengths.contains(&len), "no role of {len} bytes");
    }
    for rem in 0..4 {
        let ascii = roles
            .keys()
            .filter(|r| r.len() % 4 == rem && r.is_ascii())
            .count();
        let wide = roles
            .keys()
            .filter(|r| r.len() % 4 == rem && !r.is_ascii())
            .count();
        assert!(
            ascii >= 10 && wide >= 10,
            "length % 4 == {rem}: {ascii} ascii, {wide} non-ascii roles"
        );
    }
    assert!(
        roles.keys().any(|r| r.chars().any(|c| c.len_utf8() == 4)),
        "no role with 4-byte utf-8"
    );
    assert!(
        mask_differs_from_abs >= 100,
        "only {mask_differs_from_abs} cases where the mask and abs differ"
    );
    let hashes: BTreeSet<i32> = roles.keys().map(|r| murmur2(r.as_bytes())).collect();
    for h in recipe::EDGE_HASHES {
        assert!(hashes.contains(&h), "no role hashes to {h}");
    }
}

// ------------------------------------------------------------------- tokens

fn token(v: &Value, what: String) -> FencingToken {
    let o = Obj::new(v, what, &["producer_id", "producer_epoch"]);
    FencingToken::new(o.i64("producer_id"), o.i16("producer_epoch"))
}

#[test]
fn token_cases_order_like_the_core() {
    let file = parse("tokens.json");
    let cases = array(&file, "cases");
    let mut ran = 0;
    let mut orders = BTreeMap::<&str, usize>::new();
    let mut pairs = BTreeSet::new();
    for (i, v) in cases.iter().enumerate() {
        let what = format!("tokens.json case {i}");
        let o = Obj::new(v, what.clone(), &["a", "b", "order"]);
        let a = token(&o.m["a"], format!("{what} a"));
        let b = token(&o.m["b"], format!("{what} b"));
        let want = match o.str("order") {
            "less" => Ordering::Less,
            "equal" => Ordering::Equal,
            "greater" => Ordering::Greater,
            other => panic!("{what}: order {other:?}"),
        };
        assert_eq!(a.cmp(&b), want, "{what}: {a} vs {b}");
        assert_eq!(b.cmp(&a), want.reverse(), "{what}: reversed");
        assert_eq!(a == b, want == Ordering::Equal, "{what}: equality");
        // The order is the pair's: producer id first, then epoch.
        assert_eq!(
            (a.producer_id, a.producer_epoch).cmp(&(b.producer_id, b.producer_epoch)),
            want,
            "{what}"
        );
        *orders.entry(o.str("order")).or_default() += 1;
        pairs.insert((
            (a.producer_id, a.producer_epoch),
            (b.producer_id, b.producer_epoch),
        ));
        ran += 1;
    }
    assert_eq!(ran, cases.len());
    assert_eq!(
        ran,
        recipe::token_cases().len(),
        "the file and the recipe hold the same number of cases"
    );
    assert_eq!(orders.len(), 3, "every order occurs: {orders:?}");
    let p = |t: FencingToken| (t.producer_id, t.producer_epoch);
    let rotation = (p(FencingToken::new(8, 0)), p(FencingToken::new(7, 32766)));
    assert!(pairs.contains(&rotation), "no producer-id rotation case");
    assert!(
        pairs.contains(&(p(NO_EPOCH), p(NO_EPOCH))),
        "no NoEpoch equality case"
    );
    assert!(
        pairs.contains(&(p(NO_EPOCH), p(FencingToken::new(0, 0)))),
        "no NoEpoch below (0, 0) case"
    );
    assert!(
        pairs.iter().any(|(a, b)| a.0 < -1 || b.0 < -1),
        "no negative producer id below -1"
    );
    // NoEpoch ranks below every minted (non-negative) token in the file.
    for (a, b) in &pairs {
        if *a == p(NO_EPOCH) && b.0 >= 0 && b.1 >= 0 {
            assert_eq!(
                FencingToken::new(a.0, a.1).cmp(&FencingToken::new(b.0, b.1)),
                Ordering::Less
            );
        }
    }
}
