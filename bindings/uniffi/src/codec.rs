//! The record layouts, the partition of a role and fencing tokens: each
//! function converts its values and calls the core function of the same
//! name; none re-implements a layout, a hash or an order.

use std::cmp::Ordering;

use krabka_coordination as core;

use crate::error::KrabkaError;

/// The kind of a record key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, uniffi::Enum)]
pub enum KeyKind {
    /// A member's registration in a role's roster.
    Registration,
    /// The lease of a role.
    Lease,
}

/// A record key of the state topic: a registration key names the role and
/// the member; a lease key names the role (its member is empty).
#[derive(Debug, Clone, PartialEq, Eq, Hash, uniffi::Record)]
pub struct Key {
    /// Registration or lease.
    pub kind: KeyKind,
    /// The role.
    pub role: String,
    /// The member (empty for a lease key).
    pub member: String,
}

/// The value of a registration record.
#[derive(Debug, Clone, PartialEq, Eq, Hash, uniffi::Record)]
pub struct Registration {
    /// The member id.
    pub member: String,
    /// When the member registered, in epoch milliseconds of its clock
    /// (informational; the rank comes from the record's offset).
    pub registered_at: i64,
}

/// A fencing token: the producer id and epoch Kafka's transaction
/// coordinator minted for a role. Tokens order by producer id first, then
/// epoch ([`compare_tokens`]); `noEpoch()` is the token of no term. Its
/// wire form is [`token_text`], read back by [`parse_token`].
///
/// It crosses the FFI as [`FencingTokenParts`] (a uniffi custom type):
/// Swift sees it as that record; Kotlin maps it to the hand-written class
/// `krabka.coordination.FencingToken` (bindings/uniffi/kotlin/Token.kt,
/// configured in uniffi.toml), whose `toString()` is the wire form and whose
/// companion has `parse` (a Java static).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FencingToken {
    /// The producer id.
    pub producer_id: i64,
    /// The producer epoch.
    pub producer_epoch: i16,
}

/// The fields of a [`FencingToken`] as they cross the FFI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, uniffi::Record)]
pub struct FencingTokenParts {
    /// The producer id.
    pub producer_id: i64,
    /// The producer epoch.
    pub producer_epoch: i16,
}

uniffi::custom_type!(FencingToken, FencingTokenParts, {
    lower: |t| FencingTokenParts {
        producer_id: t.producer_id,
        producer_epoch: t.producer_epoch,
    },
    try_lift: |p| Ok(FencingToken {
        producer_id: p.producer_id,
        producer_epoch: p.producer_epoch,
    }),
});

/// The value of a lease record.
#[derive(Debug, Clone, PartialEq, Eq, Hash, uniffi::Record)]
pub struct Lease {
    /// The holder.
    pub member: String,
    /// The holder's fencing token.
    pub token: FencingToken,
    /// When the lease was granted, in epoch milliseconds of the holder's
    /// clock.
    pub granted_at: i64,
    /// When the lease runs out, in epoch milliseconds of the holder's clock.
    pub deadline: i64,
}

/// One member of a role's roster.
#[derive(Debug, Clone, PartialEq, Eq, Hash, uniffi::Record)]
pub struct RosterEntry {
    /// The member id.
    pub member: String,
    /// The offset of the member's latest registration: its join sequence.
    pub offset: i64,
    /// The `registered_at` of that registration (epoch milliseconds).
    pub registered_at: i64,
}

impl From<core::FencingToken> for FencingToken {
    fn from(t: core::FencingToken) -> Self {
        FencingToken {
            producer_id: t.producer_id,
            producer_epoch: t.producer_epoch,
        }
    }
}

impl From<FencingToken> for core::FencingToken {
    fn from(t: FencingToken) -> Self {
        core::FencingToken::new(t.producer_id, t.producer_epoch)
    }
}

impl From<core::Key> for Key {
    fn from(k: core::Key) -> Self {
        Key {
            kind: match k.kind {
                core::KeyKind::Registration => KeyKind::Registration,
                core::KeyKind::Lease => KeyKind::Lease,
            },
            role: k.role,
            member: k.member,
        }
    }
}

impl From<Key> for core::Key {
    fn from(k: Key) -> Self {
        match k.kind {
            KeyKind::Registration => core::Key::registration(k.role, k.member),
            KeyKind::Lease => core::Key {
                kind: core::KeyKind::Lease,
                role: k.role,
                member: k.member,
            },
        }
    }
}

impl From<core::Registration> for Registration {
    fn from(r: core::Registration) -> Self {
        Registration {
            member: r.member,
            registered_at: r.registered_at,
        }
    }
}

impl From<Registration> for core::Registration {
    fn from(r: Registration) -> Self {
        core::Registration {
            member: r.member,
            registered_at: r.registered_at,
        }
    }
}

impl From<core::Lease> for Lease {
    fn from(l: core::Lease) -> Self {
        Lease {
            member: l.member,
            token: l.token.into(),
            granted_at: l.granted_at,
            deadline: l.deadline,
        }
    }
}

impl From<Lease> for core::Lease {
    fn from(l: Lease) -> Self {
        core::Lease {
            member: l.member,
            token: l.token.into(),
            granted_at: l.granted_at,
            deadline: l.deadline,
        }
    }
}

impl From<core::RosterEntry> for RosterEntry {
    fn from(e: core::RosterEntry) -> Self {
        RosterEntry {
            member: e.member,
            offset: e.offset,
            registered_at: e.registered_at,
        }
    }
}

/// Encodes a record key. A lease key with a member, or a role or member the
/// layout cannot hold, is an `KrabkaException.Encode` error.
#[uniffi::export]
pub fn encode_key(key: Key) -> Result<Vec<u8>, KrabkaError> {
    Ok(core::encode_key(&key.into()).map_err(core::Error::from)?)
}

/// Decodes a record key; malformed bytes are `KrabkaException.MalformedKey`.
#[uniffi::export]
pub fn decode_key(data: Vec<u8>) -> Result<Key, KrabkaError> {
    Ok(core::decode_key(&data).map_err(core::Error::from)?.into())
}

/// Encodes a registration value; an empty or over-long member is an
/// `KrabkaException.Encode` error.
#[uniffi::export]
pub fn encode_registration(registration: Registration) -> Result<Vec<u8>, KrabkaError> {
    Ok(core::encode_registration(&registration.into()).map_err(core::Error::from)?)
}

/// Decodes a registration value; malformed bytes are
/// `KrabkaException.MalformedRegistration`.
#[uniffi::export]
pub fn decode_registration(data: Vec<u8>) -> Result<Registration, KrabkaError> {
    Ok(core::decode_registration(&data)
        .map_err(core::Error::from)?
        .into())
}

/// Encodes a lease value; an empty or over-long member is an
/// `KrabkaException.Encode` error.
#[uniffi::export]
pub fn encode_lease(lease: Lease) -> Result<Vec<u8>, KrabkaError> {
    Ok(core::encode_lease(&lease.into()).map_err(core::Error::from)?)
}

/// Decodes a lease value; malformed bytes are `KrabkaException.MalformedLease`.
#[uniffi::export]
pub fn decode_lease(data: Vec<u8>) -> Result<Lease, KrabkaError> {
    Ok(core::decode_lease(&data).map_err(core::Error::from)?.into())
}

/// Kafka's murmur2 hash (`Utils.murmur2`) of `data`, as a signed 32-bit
/// integer.
#[uniffi::export]
pub fn murmur2(data: Vec<u8>) -> i32 {
    core::murmur2(&data)
}

/// The partition of the state topic that holds `role` among `partitions`:
/// murmur2 of the role's UTF-8 bytes, made positive, modulo the count. An
/// empty role or a count below 1 is `KrabkaException.InvalidArgument`.
#[uniffi::export]
pub fn role_partition(role: String, partitions: i32) -> Result<i32, KrabkaError> {
    Ok(core::role_partition(&role, partitions)?)
}

/// The order of two tokens: -1 when `a` is older than `b`, 0 when they are
/// the same token, 1 when `a` is newer (producer id first, then epoch).
#[uniffi::export]
pub fn compare_tokens(a: FencingToken, b: FencingToken) -> i8 {
    let (a, b): (core::FencingToken, core::FencingToken) = (a.into(), b.into());
    match a.cmp(&b) {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    }
}

/// The token of no term (`NO_EPOCH`: producer id -1, epoch -1), what a
/// role nobody has taken reports.
#[uniffi::export]
pub fn no_epoch() -> FencingToken {
    core::NO_EPOCH.into()
}

/// The wire form of `token`: `PRODUCER_ID/EPOCH` in decimal (`"4001/7"`),
/// or `"NoEpoch"` for `noEpoch()`; the core's text, the same in every
/// binding, the CLI and `KRABKA_TOKEN`.
#[uniffi::export]
pub fn token_text(token: FencingToken) -> String {
    core::FencingToken::from(token).to_string()
}

/// The token of its wire form `text` (`"4001/7"`, `"NoEpoch"`), read by the
/// core's parser as in every binding. Malformed text is
/// `KrabkaException.InvalidArgument`, its detail quoting the text and naming
/// the expected form.
#[uniffi::export]
pub fn parse_token(text: String) -> Result<FencingToken, KrabkaError> {
    Ok(krabka_coordination_bindings::args::token(&text)?.into())
}

/// True for `noEpoch()`.
#[uniffi::export]
pub fn is_no_epoch(token: FencingToken) -> bool {
    core::FencingToken::from(token).is_no_epoch()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_the_core() {
        let lease = Lease {
            member: "m-1".into(),
            token: FencingToken {
                producer_id: i64::MAX,
                producer_epoch: 7,
            },
            granted_at: -1,
            deadline: i64::MIN,
        };
        let bytes = encode_lease(lease.clone()).unwrap();
        assert_eq!(bytes, core::encode_lease(&lease.clone().into()).unwrap());
        assert_eq!(decode_lease(bytes).unwrap(), lease);
        let key = Key {
            kind: KeyKind::Lease,
            role: "orders".into(),
            member: String::new(),
        };
        assert_eq!(decode_key(encode_key(key.clone()).unwrap()).unwrap(), key);
        assert!(matches!(
            decode_registration(vec![0, 0]),
            Err(KrabkaError::MalformedRegistration { .. })
        ));
        assert!(matches!(
            encode_registration(Registration {
                member: String::new(),
                registered_at: 0
            }),
            Err(KrabkaError::Encode { .. })
        ));
    }

    #[test]
    fn tokens_have_the_cores_wire_form() {
        let t = FencingToken {
            producer_id: 4001,
            producer_epoch: 7,
        };
        assert_eq!(token_text(t), "4001/7");
        assert_eq!(token_text(no_epoch()), "NoEpoch");
        assert_eq!(parse_token("4001/7".into()), Ok(t));
        assert_eq!(parse_token("NoEpoch".into()), Ok(no_epoch()));
        match parse_token("4001:7".into()) {
            Err(KrabkaError::InvalidArgument { detail }) => {
                assert!(
                    detail.starts_with("\"4001:7\" is not a fencing token"),
                    "{detail}"
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn tokens_and_partitions() {
        assert!(is_no_epoch(no_epoch()));
        let a = FencingToken {
            producer_id: 1,
            producer_epoch: 5,
        };
        let b = FencingToken {
            producer_id: 2,
            producer_epoch: 0,
        };
        assert_eq!(compare_tokens(a, b), -1);
        assert_eq!(compare_tokens(b, a), 1);
        assert_eq!(compare_tokens(a, a), 0);
        assert_eq!(role_partition("orders".into(), 16), Ok(12));
        assert!(matches!(
            role_partition("orders".into(), 0),
            Err(KrabkaError::InvalidArgument { .. })
        ));
    }
}
