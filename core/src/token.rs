//! The fencing token.
//!
//! # Why a pair and not the epoch alone
//!
//! The producer epoch is an `i16`. When the transaction coordinator would bump
//! it past 32766 it instead rotates the transactional id to a **new producer
//! id with epoch 0**. A comparison of the epoch alone would then rank the new
//! leader (epoch 0) below every stale writer of the old producer id, and accept
//! a stale writer after about 32000 leadership changes. [`FencingToken`] orders
//! by producer id first and only then by epoch, both as signed integers.
//!
//! The order is part of the cross-port contract: `golden/tokens.json` lists
//! pairs of tokens and their order (rotation, equality, [`NO_EPOCH`], negative
//! ids, the extremes of both fields), and every port asserts it.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

/// The leadership token of a role: the producer id and producer epoch that
/// Kafka's transaction coordinator minted for `transactional.id = <role>`.
///
/// Ordered by `producer_id` first, then `producer_epoch`. [`NO_EPOCH`] ranks
/// below every minted token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FencingToken {
    /// The producer id the coordinator assigned to the transactional id.
    pub producer_id: i64,
    /// The producer epoch within that producer id.
    pub producer_epoch: i16,
}

/// The token of a role that no member has taken: producer id -1, epoch -1.
/// It ranks below every minted token (minted ids and epochs are never negative).
pub const NO_EPOCH: FencingToken = FencingToken {
    producer_id: -1,
    producer_epoch: -1,
};

impl FencingToken {
    /// A token of the given producer id and epoch.
    pub const fn new(producer_id: i64, producer_epoch: i16) -> Self {
        FencingToken {
            producer_id,
            producer_epoch,
        }
    }

    /// True for [`NO_EPOCH`].
    pub fn is_no_epoch(&self) -> bool {
        *self == NO_EPOCH
    }
}

impl Ord for FencingToken {
    fn cmp(&self, other: &Self) -> Ordering {
        self.producer_id
            .cmp(&other.producer_id)
            .then(self.producer_epoch.cmp(&other.producer_epoch))
    }
}

impl PartialOrd for FencingToken {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Default for FencingToken {
    fn default() -> Self {
        NO_EPOCH
    }
}

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_no_epoch() {
            f.write_str("NoEpoch")
        } else {
            write!(f, "{}/{}", self.producer_id, self.producer_epoch)
        }
    }
}

/// The wire form of a token is its [`Display`](fmt::Display) text:
/// `PRODUCER_ID/EPOCH` in decimal (`4001/7`, `-4242/-2`), or `NoEpoch`.
/// Parsing is exact: no spaces, no signs other than a leading `-`, both
/// numbers within their types (`i64`, `i16`). `-1/-1` parses as [`NO_EPOCH`]
/// too. Every binding's `parse` calls this, so all of them accept and refuse
/// the same texts.
impl FromStr for FencingToken {
    type Err = TokenParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "NoEpoch" {
            return Ok(NO_EPOCH);
        }
        let bad = || TokenParseError { text: s.to_owned() };
        let (pid, epoch) = s.split_once('/').ok_or_else(bad)?;
        let plain = |t: &str| {
            let digits = t.strip_prefix('-').unwrap_or(t);
            !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
        };
        if !plain(pid) || !plain(epoch) {
            return Err(bad());
        }
        let pid: i64 = pid.parse().map_err(|_| bad())?;
        let epoch: i16 = epoch.parse().map_err(|_| bad())?;
        Ok(FencingToken::new(pid, epoch))
    }
}

/// A text that is not a token's wire form. Its message quotes the text (cut
/// to 64 characters) and the expected form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenParseError {
    text: String,
}

impl TokenParseError {
    /// The refused text.
    pub fn text(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for TokenParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown: String = self.text.chars().take(64).collect();
        let cut = if shown.len() < self.text.len() {
            "..."
        } else {
            ""
        };
        write!(
            f,
            "{shown:?}{cut} is not a fencing token: expected PRODUCER_ID/EPOCH in decimal, \
             e.g. \"4001/7\" (producer id a 64-bit integer, epoch -32768 to 32767), or \"NoEpoch\""
        )
    }
}

impl std::error::Error for TokenParseError {}

#[cfg(feature = "kafka-client")]
impl From<krabka_kafka::ProducerEpoch> for FencingToken {
    fn from(p: krabka_kafka::ProducerEpoch) -> Self {
        FencingToken::new(p.producer_id, p.producer_epoch)
    }
}

#[cfg(feature = "kafka-client")]
impl From<FencingToken> for krabka_kafka::ProducerEpoch {
    fn from(t: FencingToken) -> Self {
        krabka_kafka::ProducerEpoch::new(t.producer_id, t.producer_epoch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn producer_id_rotation_outranks_exhausted_epoch() {
        let old = FencingToken::new(7, 32766);
        let new = FencingToken::new(8, 0);
        assert!(new > old);
        // The wrong, epoch-only comparison would say the opposite.
        assert!(new.producer_epoch < old.producer_epoch);
    }

    #[test]
    fn orders_signed_producer_id_first_then_epoch() {
        let t = FencingToken::new;
        let mut tokens = vec![
            t(1, 0),
            t(-2, 9),
            NO_EPOCH,
            t(-1, 0),
            t(0, -5),
            t(0, 3),
            t(i64::MIN, i16::MAX),
        ];
        tokens.sort();
        assert_eq!(
            tokens,
            [
                t(i64::MIN, i16::MAX),
                t(-2, 9),
                NO_EPOCH,
                t(-1, 0),
                t(0, -5),
                t(0, 3),
                t(1, 0)
            ]
        );
        assert_eq!(t(5, 1).partial_cmp(&t(5, 2)), Some(Ordering::Less));
        assert_eq!(t(5, 2).max(t(6, i16::MIN)), t(6, i16::MIN));
    }

    #[test]
    fn no_epoch_is_exactly_minus_one_minus_one() {
        assert!(NO_EPOCH.is_no_epoch());
        assert_eq!((NO_EPOCH.producer_id, NO_EPOCH.producer_epoch), (-1, -1));
        assert!(!FencingToken::new(-1, 0).is_no_epoch());
        assert!(!FencingToken::new(0, -1).is_no_epoch());
    }

    #[test]
    fn displays_as_id_slash_epoch() {
        assert_eq!(NO_EPOCH.to_string(), "NoEpoch");
        assert_eq!(FencingToken::new(7, 32766).to_string(), "7/32766");
        assert_eq!(FencingToken::new(-4242, -2).to_string(), "-4242/-2");
    }

    #[test]
    fn the_display_text_parses_back() {
        let t = FencingToken::new;
        for token in [
            t(7, 32766),
            t(-4242, -2),
            t(i64::MIN, i16::MIN),
            t(i64::MAX, i16::MAX),
            t(0, 0),
            NO_EPOCH,
        ] {
            assert_eq!(
                token.to_string().parse::<FencingToken>(),
                Ok(token),
                "{token}"
            );
        }
        assert_eq!("-1/-1".parse::<FencingToken>(), Ok(NO_EPOCH));
    }

    #[test]
    fn malformed_texts_are_refused_by_name() {
        for bad in [
            "",
            "/",
            "7",
            "7/",
            "/7",
            "7/3/1",
            " 7/3",
            "7/ 3",
            "+7/3",
            "7/+3",
            "7.0/3",
            "0x7/3",
            "7/32768",
            "7/-32769",
            "9223372036854775808/0",
            "--1/0",
            "noepoch",
            "7\\3",
            "٣/1",
        ] {
            let e = bad.parse::<FencingToken>().expect_err(bad);
            assert_eq!(e.text(), bad);
            let m = e.to_string();
            assert!(
                m.starts_with(&format!("{bad:?} is not a fencing token")),
                "{m}"
            );
            assert!(m.contains("PRODUCER_ID/EPOCH"), "{m}");
        }
        let long = "9".repeat(500);
        let m = long.parse::<FencingToken>().unwrap_err().to_string();
        assert!(m.len() < 250, "{m}");
        assert!(
            m.starts_with(&format!("\"{}\"... is not", "9".repeat(64))),
            "{m}"
        );
    }

    #[test]
    fn no_epoch_ranks_below_minted_tokens() {
        assert!(NO_EPOCH < FencingToken::new(0, 0));
        assert!(NO_EPOCH < FencingToken::new(i64::MAX, i16::MAX));
        assert_eq!(NO_EPOCH.cmp(&NO_EPOCH), Ordering::Equal);
        assert_eq!(FencingToken::default(), NO_EPOCH);
    }
}
