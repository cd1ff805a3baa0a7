//! The partition of a role: Kafka's own key partitioning of the role name.
//!
//! `murmur2` of the role's UTF-8 bytes (Kafka's `Utils.murmur2`, seed
//! `0x9747b28c`), masked with `Utils.toPositive` (clear the sign bit, which is
//! *not* an absolute value), modulo the partition count. This is what Kafka's
//! producer does for a keyed record whose key is the role serialised as UTF-8
//! (`BuiltInPartitioner.partitionForKey`), so a Java or Go producer that keys by
//! role lands on the same partition.
//!
//! Every writer of a role pins this partition itself; the registration key and
//! the lease key of one role differ, and hashing the keys would split a role's
//! records over two partitions and lose their total order.
//!
//! The mask and the absolute value differ for every negative hash: for
//! `h = -973932308` (the hash of `"21"`) and 16 partitions the mask gives
//! `(h & 0x7fffffff) % 16 = 12` and the absolute value would give `4`.
//! `golden/partitions.json` holds many such roles, checked against Kafka's own
//! Java code by `ci/golden.sh`.

use crate::error::Error;

/// Kafka's murmur2 hash (`org.apache.kafka.common.utils.Utils.murmur2`), as a
/// signed 32-bit value.
///
/// Four-byte blocks are read little-endian, as Kafka does; the seed is
/// `0x9747b28c`.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let length = data.len();
    let mut h: u32 = SEED ^ (length as u32);
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    match rest.len() {
        3 => {
            h ^= (rest[2] as u32) << 16;
            h ^= (rest[1] as u32) << 8;
            h ^= rest[0] as u32;
            h = h.wrapping_mul(M);
        }
        2 => {
            h ^= (rest[1] as u32) << 8;
            h ^= rest[0] as u32;
            h = h.wrapping_mul(M);
        }
        1 => {
            h ^= rest[0] as u32;
            h = h.wrapping_mul(M);
        }
        _ => {}
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition of `role` among `partitions`: `toPositive(murmur2(role)) % partitions`,
/// always in `0..partitions`.
///
/// Refuses an empty role and a partition count below 1 with
/// [`Error::InvalidArgument`].
pub fn role_partition(role: &str, partitions: i32) -> Result<i32, Error> {
    if role.is_empty() {
        return Err(Error::InvalidArgument("role must not be empty".into()));
    }
    if partitions < 1 {
        return Err(Error::InvalidArgument(format!(
            "partitions must be at least 1, got {partitions}"
        )));
    }
    Ok(partition_of_hash(murmur2(role.as_bytes()), partitions))
}

/// `toPositive(hash) % partitions` for a count already known to be at least 1.
pub(crate) fn partition_of_hash(hash: i32, partitions: i32) -> i32 {
    (hash & 0x7fff_ffff) % partitions
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_kafka_reference_values() {
        // Values from Kafka's UtilsTest.testMurmur2.
        assert_eq!(murmur2(b"21"), -973932308);
        assert_eq!(murmur2(b"foobar"), -790332482);
        assert_eq!(murmur2(b"a-little-bit-long-string"), -985981536);
        assert_eq!(murmur2(b"a-little-bit-longer-string"), -1486304829);
        assert_eq!(
            murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"),
            -58897971
        );
        assert_eq!(murmur2(b"abc"), 479470107);
    }

    #[test]
    fn masks_the_sign_bit_instead_of_taking_the_absolute_value() {
        let h = murmur2(b"21");
        assert!(h < 0);
        assert_eq!(role_partition("21", 16).unwrap(), 12);
        assert_eq!(
            h.unsigned_abs() % 16,
            4,
            "the absolute value would pick another partition"
        );
        assert_eq!(partition_of_hash(i32::MIN, 7), 0);
        assert_eq!(partition_of_hash(-1, 1000), i32::MAX % 1000);
        assert_eq!(partition_of_hash(i32::MAX, 1000), i32::MAX % 1000);
        assert_eq!(partition_of_hash(-5, 1), 0);
    }

    #[test]
    fn partitions_stay_in_range() {
        for role in [
            "a", "ab", "abc", "abcd", "abcde", "rôle", "🦀", "21", "foobar",
        ] {
            for n in [1, 2, 3, 16, 50, 1000, i32::MAX] {
                let p = role_partition(role, n).unwrap();
                assert!((0..n).contains(&p), "{role} {n} -> {p}");
            }
            assert_eq!(role_partition(role, 1).unwrap(), 0);
        }
    }

    #[test]
    fn refuses_bad_arguments() {
        for (role, n, want) in [
            ("", 3, "role"),
            ("r", 0, "got 0"),
            ("r", -1, "got -1"),
            ("r", i32::MIN, "got"),
        ] {
            match role_partition(role, n) {
                Err(Error::InvalidArgument(m)) => assert!(m.contains(want), "{m}"),
                other => panic!("{role:?} {n}: {other:?}"),
            }
        }
    }
}
