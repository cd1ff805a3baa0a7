//! Properties of the record codec, the partition and the token order.

use krabka_coordination::codec::{
    decode_key, decode_lease, decode_registration, encode_key, encode_key_into, encode_lease,
    encode_lease_into, encode_registration, encode_registration_into, Key, KeyKind, Lease,
    Registration,
};
use krabka_coordination::{murmur2, role_partition, FencingToken, Part, MAX_STRING_LEN};
use proptest::prelude::*;

/// A string of about `bytes` UTF-8 bytes (never more) of characters from every
/// Unicode plane, drawn by a small fixed generator from `seed`: building long
/// strings this way is much cheaper than a proptest value per character.
fn string_from_seed(seed: u64, bytes: usize) -> String {
    let mut x = seed | 1;
    let mut s = String::with_capacity(bytes);
    loop {
        // xorshift64*
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let r = x.wrapping_mul(0x2545_f491_4f6c_dd1d);
        // Pick the width first so that every width is common.
        let c = match r % 4 {
            0 => char::from_u32((r >> 8) as u32 % 0x80),
            1 => char::from_u32(0x80 + (r >> 8) as u32 % (0x800 - 0x80)),
            2 => char::from_u32(0x800 + (r >> 8) as u32 % (0x1_0000 - 0x800)),
            _ => char::from_u32(0x1_0000 + (r >> 8) as u32 % (0x11_0000 - 0x1_0000)),
        };
        let Some(c) = c else { continue }; // a surrogate
        if s.len() + c.len_utf8() > bytes {
            break;
        }
        s.push(c);
    }
    s
}

/// Any string of `min_bytes` to [`MAX_STRING_LEN`] bytes, from every Unicode
/// plane: mostly short, often long, sometimes exactly at the limit.
fn layout_string(min_bytes: usize) -> impl Strategy<Value = String> {
    let short = proptest::collection::vec(any::<char>(), 0..24).prop_map(String::from_iter);
    let long = (any::<u64>(), 0..=MAX_STRING_LEN).prop_map(|(seed, n)| string_from_seed(seed, n));
    let at_limit = any::<u64>().prop_map(|seed| {
        let mut s = string_from_seed(seed, MAX_STRING_LEN);
        while s.len() < MAX_STRING_LEN {
            s.push('z');
        }
        s
    });
    prop_oneof![6 => short, 2 => long, 1 => at_limit].prop_map(move |mut s: String| {
        while s.len() < min_bytes {
            s.push('m');
        }
        assert!(s.len() <= MAX_STRING_LEN);
        s
    })
}

/// A string over the limit.
fn over_limit() -> impl Strategy<Value = String> {
    (MAX_STRING_LEN + 1..MAX_STRING_LEN + 5000, any::<char>()).prop_map(|(len, c)| {
        let mut s = String::with_capacity(len + 4);
        while s.len() < len {
            s.push(c);
        }
        s
    })
}

fn edge_i64() -> impl Strategy<Value = i64> {
    prop_oneof![
        Just(i64::MIN),
        Just(i64::MAX),
        Just(-1i64),
        Just(0i64),
        any::<i64>()
    ]
}

fn edge_i16() -> impl Strategy<Value = i16> {
    prop_oneof![
        Just(i16::MIN),
        Just(i16::MAX),
        Just(-1i16),
        Just(0i16),
        Just(32766i16),
        any::<i16>()
    ]
}

fn key() -> impl Strategy<Value = Key> {
    prop_oneof![
        (layout_string(1), layout_string(1)).prop_map(|(r, m)| Key::registration(r, m)),
        layout_string(1).prop_map(Key::lease),
    ]
}

fn registration() -> impl Strategy<Value = Registration> {
    (layout_string(1), edge_i64()).prop_map(|(member, registered_at)| Registration {
        member,
        registered_at,
    })
}

fn lease() -> impl Strategy<Value = Lease> {
    (
        layout_string(1),
        edge_i64(),
        edge_i16(),
        edge_i64(),
        edge_i64(),
    )
        .prop_map(|(member, id, epoch, g, d)| Lease {
            member,
            token: FencingToken::new(id, epoch),
            granted_at: g,
            deadline: d,
        })
}

/// Kafka's `Utils.murmur2` translated line by line from the Java, in `i32`
/// arithmetic with Java's `>>>`, as a second implementation to compare with.
fn java_murmur2(data: &[u8]) -> i32 {
    let length = data.len() as i32;
    let seed = 0x9747b28c_u32 as i32;
    let m = 0x5bd1e995_i32;
    let r = 24;
    let mut h = seed ^ length;
    let length4 = length / 4;
    let b = |i: i32| (data[i as usize] as i32) & 0xff;
    for i in 0..length4 {
        let i4 = i * 4;
        let mut k = b(i4) + (b(i4 + 1) << 8) + (b(i4 + 2) << 16) + (b(i4 + 3) << 24);
        k = k.wrapping_mul(m);
        k ^= ((k as u32) >> r) as i32;
        k = k.wrapping_mul(m);
        h = h.wrapping_mul(m);
        h ^= k;
    }
    let tail = length & !3;
    let rest = length % 4;
    if rest == 3 {
        h ^= b(tail + 2) << 16;
    }
    if rest >= 2 {
        h ^= b(tail + 1) << 8;
    }
    if rest >= 1 {
        h ^= b(tail);
        h = h.wrapping_mul(m);
    }
    h ^= ((h as u32) >> 13) as i32;
    h = h.wrapping_mul(m);
    h ^= ((h as u32) >> 15) as i32;
    h
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn keys_round_trip(k in key()) {
        let bytes = encode_key(&k).unwrap();
        prop_assert_eq!(bytes.len(), 8 + k.role.len() + k.member.len());
        prop_assert_eq!(&bytes[..4], &[0, 0, 0, k.kind.code() as u8]);
        prop_assert_eq!(decode_key(&bytes).unwrap(), k);
    }

    #[test]
    fn registrations_round_trip(r in registration()) {
        let bytes = encode_registration(&r).unwrap();
        prop_assert_eq!(bytes.len(), 12 + r.member.len());
        prop_assert_eq!(&bytes[bytes.len() - 8..], &r.registered_at.to_be_bytes());
        prop_assert_eq!(decode_registration(&bytes).unwrap(), r);
    }

    #[test]
    fn leases_round_trip(l in lease()) {
        let bytes = encode_lease(&l).unwrap();
        prop_assert_eq!(bytes.len(), 30 + l.member.len());
        prop_assert_eq!(&bytes[bytes.len() - 8..], &l.deadline.to_be_bytes());
        prop_assert_eq!(decode_lease(&bytes).unwrap(), l);
    }

    #[test]
    fn every_proper_prefix_and_every_extension_fails_with_the_part(l in lease(), r in registration(), k in key(), extra in proptest::collection::vec(any::<u8>(), 1..9)) {
        for (part, bytes) in [
            (Part::Key, encode_key(&k).unwrap()),
            (Part::RegistrationValue, encode_registration(&r).unwrap()),
            (Part::LeaseValue, encode_lease(&l).unwrap()),
        ] {
            let decode = |b: &[u8]| match part {
                Part::Key => decode_key(b).map(drop),
                Part::RegistrationValue => decode_registration(b).map(drop),
                Part::LeaseValue => decode_lease(b).map(drop),
            };
            // Cutting anywhere (a sample of cuts for long encodings) fails.
            let step = (bytes.len() / 64).max(1);
            for cut in (0..bytes.len()).step_by(step).chain([bytes.len() - 1]) {
                let e = decode(&bytes[..cut]).unwrap_err();
                prop_assert_eq!(e.part, part);
            }
            let mut longer = bytes.clone();
            longer.extend_from_slice(&extra);
            let e = decode(&longer).unwrap_err();
            prop_assert_eq!(e.part, part);
            prop_assert!(e.message.contains("trailing bytes"), "{}", e.message);
        }
    }

    #[test]
    fn encoding_refuses_strings_over_the_limit(long in over_limit(), fine in layout_string(1), at in edge_i64()) {
        let mut buf = vec![0xab];
        let e = encode_key_into(&Key::registration(long.as_str(), fine.as_str()), &mut buf).unwrap_err();
        prop_assert_eq!((e.part, e.field), (Part::Key, "role"));
        let e = encode_key_into(&Key::registration(fine.as_str(), long.as_str()), &mut buf).unwrap_err();
        prop_assert_eq!((e.part, e.field), (Part::Key, "member"));
        let e = encode_key_into(&Key::lease(long.as_str()), &mut buf).unwrap_err();
        prop_assert_eq!((e.part, e.field), (Part::Key, "role"));
        let e = encode_registration_into(&Registration { member: long.clone(), registered_at: at }, &mut buf).unwrap_err();
        prop_assert_eq!((e.part, e.field), (Part::RegistrationValue, "member"));
        let l = Lease { member: long.clone(), token: FencingToken::new(at, 1), granted_at: at, deadline: at };
        let e = encode_lease_into(&l, &mut buf).unwrap_err();
        prop_assert_eq!((e.part, e.field), (Part::LeaseValue, "member"));
        let len_text = long.len().to_string();
        prop_assert!(e.message.contains(&len_text), "{}", e.message);
        prop_assert_eq!(buf, vec![0xab], "refusals leave the buffer as it was");
    }

    #[test]
    fn arbitrary_bytes_decode_canonically_or_fail_with_the_part(bytes in proptest::collection::vec(any::<u8>(), 0..64), head in 0u8..4) {
        // Steer some inputs into plausible headers so the deeper checks run.
        let mut bytes = bytes;
        if bytes.len() >= 4 && head > 0 {
            bytes[0] = 0;
            bytes[1] = 0;
            if head == 2 { bytes[2] = 0; bytes[3] &= 1; }
        }
        match decode_key(&bytes) {
            Ok(k) => prop_assert_eq!(encode_key(&k).unwrap(), bytes.clone()),
            Err(e) => prop_assert_eq!(e.part, Part::Key),
        }
        match decode_registration(&bytes) {
            Ok(r) => prop_assert_eq!(encode_registration(&r).unwrap(), bytes.clone()),
            Err(e) => prop_assert_eq!(e.part, Part::RegistrationValue),
        }
        match decode_lease(&bytes) {
            Ok(l) => prop_assert_eq!(encode_lease(&l).unwrap(), bytes.clone()),
            Err(e) => prop_assert_eq!(e.part, Part::LeaseValue),
        }
    }

    #[test]
    fn mutated_encodings_decode_canonically_or_fail_with_the_part(
        l in lease(), r in registration(), k in key(), at in any::<prop::sample::Index>(), byte in any::<u8>()
    ) {
        for (part, mut bytes) in [
            (Part::Key, encode_key(&k).unwrap()),
            (Part::RegistrationValue, encode_registration(&r).unwrap()),
            (Part::LeaseValue, encode_lease(&l).unwrap()),
        ] {
            // Bias towards the header and the lengths, where the rules live.
            let i = if at.index(4) == 0 { at.index(bytes.len()) } else { at.index(bytes.len().min(8)) };
            bytes[i] = byte;
            let reencoded = match part {
                Part::Key => decode_key(&bytes).map(|v| encode_key(&v).unwrap()),
                Part::RegistrationValue => decode_registration(&bytes).map(|v| encode_registration(&v).unwrap()),
                Part::LeaseValue => decode_lease(&bytes).map(|v| encode_lease(&v).unwrap()),
            };
            match reencoded {
                Ok(again) => prop_assert_eq!(again, bytes, "a decoded value re-encodes to the same bytes"),
                Err(e) => prop_assert_eq!(e.part, part),
            }
        }
    }

    #[test]
    fn a_valid_member_field_with_its_kind_flipped_fails(role in layout_string(1), member in layout_string(1)) {
        // A registration key relabelled as a lease key keeps a member: refused.
        let mut bytes = encode_key(&Key::registration(role.as_str(), member.as_str())).unwrap();
        bytes[3] = KeyKind::Lease.code() as u8;
        let e = decode_key(&bytes).unwrap_err();
        prop_assert!(e.message.contains("lease key with a non-empty member"), "{}", e.message);
        // A lease key relabelled as a registration key has no member: refused.
        let mut bytes = encode_key(&Key::lease(role.as_str())).unwrap();
        bytes[3] = KeyKind::Registration.code() as u8;
        let e = decode_key(&bytes).unwrap_err();
        prop_assert!(e.message.contains("registration key with an empty member"), "{}", e.message);
    }

    #[test]
    fn murmur2_matches_a_line_by_line_java_translation(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        prop_assert_eq!(murmur2(&data), java_murmur2(&data));
    }

    #[test]
    fn partitions_are_the_masked_hash_modulo_the_count(role in layout_string(1), n in prop_oneof![1..=1000i32, Just(i32::MAX)]) {
        let p = role_partition(&role, n).unwrap();
        prop_assert!((0..n).contains(&p));
        prop_assert_eq!(p, (java_murmur2(role.as_bytes()) & 0x7fff_ffff) % n);
    }

    #[test]
    fn tokens_order_by_producer_id_then_epoch(a_id in edge_i64(), a_ep in edge_i16(), b_id in edge_i64(), b_ep in edge_i16()) {
        let (a, b) = (FencingToken::new(a_id, a_ep), FencingToken::new(b_id, b_ep));
        prop_assert_eq!(a.cmp(&b), (a_id, a_ep).cmp(&(b_id, b_ep)));
        prop_assert_eq!(a.partial_cmp(&b), Some(a.cmp(&b)));
        prop_assert_eq!(a == b, a.cmp(&b).is_eq());
        if a_id != b_id {
            // The epoch never overrides the producer id.
            prop_assert_eq!(a.cmp(&b), a_id.cmp(&b_id));
        }
    }
}
