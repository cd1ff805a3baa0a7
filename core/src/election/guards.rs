//! The acquire loop's rules beside [`evaluate`](super::evaluate): pure
//! functions of a role's state, the member's clocks and the loop's own
//! memory, called by the loop (`core/src/leadership/acquire/machine.rs`)
//! and by the model check (`model/`), so the model checks these very rules.
//!
//! | rule | when | result |
//! | --- | --- | --- |
//! | [`find_twin`] | before each step | another live process uses this member id: the loop ends fatally |
//! | [`bound_step`] | after each [`evaluate`](super::evaluate) | a wait capped at one lease (this member's) past when the holder's lease was first seen, plus rank × stagger; no challenge during the hold-off after a lost one |
//! | [`passed_over`] | on winning the challenge | the registrations the winner removes |
//!
//! None of them reads a clock or does I/O: the caller passes the wall
//! clock (`now`, epoch ms) and its monotonic clock (`mono`, ms from any
//! origin) and keeps the memory ([`SeenLease`], the hold-off) between calls.

use std::fmt;

use super::{ElectionOptions, Step};
use crate::clock::duration_millis;
use crate::state::RoleState;
use crate::token::FencingToken;

/// Why another live process is taken to use this member id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Twin {
    /// A registration of the id at this offset, after this process's first
    /// and not one this process wrote.
    RegisteredAt(i64),
    /// A lease under the id, with a token this process never minted and
    /// other than the one the first catch-up found.
    RenewsLease(FencingToken),
}

impl fmt::Display for Twin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Twin::RegisteredAt(offset) => write!(f, "registered at offset {offset}"),
            Twin::RenewsLease(token) => write!(f, "renews a lease under it with token {token}"),
        }
    }
}

/// Another live process using `member`'s id, if `state` shows one: it
/// registered after this process did (a registration of the id at an offset
/// past `own[0]` that is not in `own`, the offsets this process wrote), or
/// it writes a lease under the id while this process watches (a lease under
/// the id other than `found`, the one the first catch-up found, with a
/// token not in `minted`). Two such processes would only fence each other.
///
/// No wall clocks are compared: a lease's `granted_at` is its writer's
/// clock, and the last lease of a crashed predecessor whose clock ran ahead
/// would look like a live twin's until that clock's time had passed.
pub fn find_twin(
    state: &RoleState,
    member: &str,
    own: &[i64],
    found: Option<(FencingToken, i64)>,
    minted: &[FencingToken],
) -> Option<Twin> {
    match (state.entry(member), own.first()) {
        (Some(e), Some(first)) if e.offset > *first && !own.contains(&e.offset) => {
            return Some(Twin::RegisteredAt(e.offset));
        }
        _ => {}
    }
    state
        .lease()
        .filter(|l| {
            l.member == member
                && found != Some((l.token, l.granted_at))
                && !minted.contains(&l.token)
        })
        .map(|l| Twin::RenewsLease(l.token))
}

/// The members whose turn came before `member`'s and who did not take it:
/// the challengers ranked ahead, and a holder whose lease ran out by `now`.
/// The winner removes their registrations, so the dead (crashed members
/// that came back under another id, say) add no stagger to later
/// failovers; a live one among them sees its registration gone and
/// registers again, at the tail.
pub fn passed_over(state: &RoleState, member: &str, now: i64) -> Vec<String> {
    let Some(own) = state.entry(member) else {
        return Vec::new();
    };
    let holder = state.lease();
    let mut out: Vec<String> = state
        .roster()
        .take_while(|e| e.offset < own.offset)
        .filter(|e| holder.is_none_or(|l| l.member != e.member))
        .map(|e| e.member.clone())
        .collect();
    if let Some(l) = holder {
        if l.member != member && l.deadline <= now && state.is_registered(&l.member) {
            out.push(l.member.clone());
        }
    }
    out
}

/// The lease a waiting member saw last, and when it first saw it on its
/// monotonic clock (ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SeenLease {
    /// The lease's token.
    pub token: FencingToken,
    /// The lease's `granted_at` (its writer's clock).
    pub granted_at: i64,
    /// When this member first saw it (monotonic ms).
    pub first_seen: i64,
}

/// The hold-off after a lost challenge: the token that lost, and until when
/// (wall ms) no challenge is made unless a newer lease shows first (the
/// winner may have died between minting and writing its lease).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HoldOff {
    /// This member's token that lost.
    pub token: FencingToken,
    /// The end of the hold-off (wall ms).
    pub until: i64,
}

/// The step [`bound_step`] settled on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounded {
    /// The step to take.
    pub step: Step,
    /// When the cap shortened a wait: the capped turn (wall ms), for the
    /// caller's warning. A holder's deadline beyond one lease from when its
    /// lease was seen is a clock far ahead or a corrupt record.
    pub capped_at: Option<i64>,
}

/// `step` (what [`evaluate`](super::evaluate) gave for `state` at `now`)
/// with two bounds of the acquire loop:
///
/// 1. A holder's deadline is trusted at most one lease duration (this
///    member's `options`) past when its lease was first seen (`seen`,
///    updated here; on the monotonic clock `mono`): a wait `at` a later
///    turn is capped to that time plus rank × stagger, a challenge once it
///    passed. So a clock hours ahead or a corrupt deadline cannot stall
///    the role.
/// 2. During the hold-off after a lost challenge (`lost`, cleared here once
///    a newer lease shows or the hold-off passes) a challenge becomes a
///    wait until the hold-off ends.
pub fn bound_step(
    step: Step,
    state: &RoleState,
    now: i64,
    mono: i64,
    options: &ElectionOptions,
    seen: &mut Option<SeenLease>,
    lost: &mut Option<HoldOff>,
) -> Bounded {
    let mut step = step;
    let mut capped_at = None;
    if let Some(l) = state.lease() {
        let first_seen = match *seen {
            Some(s) if (s.token, s.granted_at) == (l.token, l.granted_at) => s.first_seen,
            _ => {
                *seen = Some(SeenLease {
                    token: l.token,
                    granted_at: l.granted_at,
                    first_seen: mono,
                });
                mono
            }
        };
        let lease_ms = duration_millis(options.lease_duration);
        let cap = now.saturating_add(first_seen.saturating_add(lease_ms) - mono);
        if let Step::WaitUntil { at, rank } = step {
            let stagger = duration_millis(options.challenge_stagger);
            let capped = cap.saturating_add(stagger.saturating_mul(rank as i64));
            if capped < at {
                capped_at = Some(capped);
                step = if now >= capped {
                    Step::Challenge
                } else {
                    Step::WaitUntil { at: capped, rank }
                };
            }
        }
    } else {
        *seen = None;
    }
    if let Some(h) = *lost {
        let superseded = state.lease().is_some_and(|l| l.token > h.token);
        if superseded || now >= h.until {
            *lost = None;
        } else if step == Step::Challenge {
            step = Step::WaitUntil {
                at: h.until,
                rank: 0,
            };
        }
    }
    Bounded { step, capped_at }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::codec::{encode_key, encode_lease, encode_registration, Key, Lease, Registration};
    use crate::transport::Record;

    const ROLE: &str = "billing";

    /// A role state from registrations (member, offset) and an optional
    /// lease (member, token, granted_at, deadline), at offsets in order.
    fn state(
        registered: &[(&str, i64)],
        lease: Option<(&str, FencingToken, i64, i64)>,
    ) -> RoleState {
        let mut records: Vec<Record> = registered
            .iter()
            .map(|(member, offset)| Record {
                offset: *offset,
                key: encode_key(&Key::registration(ROLE, *member)).unwrap(),
                value: Some(
                    encode_registration(&Registration {
                        member: (*member).into(),
                        registered_at: 0,
                    })
                    .unwrap(),
                ),
            })
            .collect();
        if let Some((member, token, granted_at, deadline)) = lease {
            records.push(Record {
                offset: records.last().map_or(0, |r| r.offset + 1),
                key: encode_key(&Key::lease(ROLE)).unwrap(),
                value: Some(
                    encode_lease(&Lease {
                        member: member.into(),
                        token,
                        granted_at,
                        deadline,
                    })
                    .unwrap(),
                ),
            });
        }
        RoleState::build(ROLE, &records).unwrap()
    }

    fn options() -> ElectionOptions {
        ElectionOptions {
            lease_duration: Duration::from_secs(10),
            challenge_stagger: Duration::from_secs(1),
            ..ElectionOptions::default()
        }
    }

    const T: FencingToken = FencingToken {
        producer_id: 7,
        producer_epoch: 3,
    };

    #[test]
    fn find_twin_a_registration_this_process_did_not_write() {
        let s = state(&[("a", 5)], None);
        assert_eq!(
            find_twin(&s, "a", &[2], None, &[]),
            Some(Twin::RegisteredAt(5))
        );
        assert_eq!(find_twin(&s, "a", &[2, 5], None, &[]), None);
        // Before this process's first registration: an older incarnation's.
        assert_eq!(find_twin(&s, "a", &[9], None, &[]), None);
    }

    #[test]
    fn find_twin_a_lease_under_the_id_this_process_never_minted() {
        let s = state(&[("a", 1)], Some(("a", T, 100, 200)));
        assert_eq!(
            find_twin(&s, "a", &[1], None, &[]),
            Some(Twin::RenewsLease(T))
        );
        assert_eq!(
            find_twin(&s, "a", &[1], Some((T, 100)), &[]),
            None,
            "the one found at the first catch-up"
        );
        assert_eq!(find_twin(&s, "a", &[1], None, &[T]), None, "minted here");
        assert_eq!(
            find_twin(&s, "b", &[1], None, &[]),
            None,
            "another member's lease"
        );
    }

    #[test]
    fn passed_over_the_challengers_ahead_and_an_expired_holder() {
        let s = state(
            &[("h", 1), ("x", 2), ("me", 3), ("y", 4)],
            Some(("h", T, 0, 100)),
        );
        assert_eq!(passed_over(&s, "me", 50), vec!["x".to_owned()]);
        assert_eq!(
            passed_over(&s, "me", 100),
            vec!["x".to_owned(), "h".to_owned()]
        );
        assert!(
            passed_over(&s, "gone", 100).is_empty(),
            "not registered: nothing"
        );
    }

    #[test]
    fn bound_step_caps_a_wait_one_lease_past_first_seen() {
        // The holder's deadline lies an hour ahead: a clock far ahead.
        let s = state(&[("h", 1), ("me", 2)], Some(("h", T, 0, 3_600_000)));
        let (mut seen, mut lost) = (None, None);
        let wait = Step::WaitUntil {
            at: 3_600_000,
            rank: 0,
        };
        let b = bound_step(wait, &s, 1_000, 50, &options(), &mut seen, &mut lost);
        assert_eq!(
            b.step,
            Step::WaitUntil {
                at: 11_000,
                rank: 0
            }
        );
        assert_eq!(b.capped_at, Some(11_000));
        assert_eq!(seen.map(|s| s.first_seen), Some(50));
        // Seen again later on both clocks: the cap stays where it was set.
        let b = bound_step(wait, &s, 6_000, 5_050, &options(), &mut seen, &mut lost);
        assert_eq!(
            b.step,
            Step::WaitUntil {
                at: 11_000,
                rank: 0
            }
        );
        // Rank 2 adds two staggers; past the cap the wait is a challenge.
        let b = bound_step(
            Step::WaitUntil {
                at: 3_600_000,
                rank: 2,
            },
            &s,
            13_500,
            12_550,
            &options(),
            &mut seen,
            &mut lost,
        );
        assert_eq!(b.step, Step::Challenge);
        // A deadline within the cap is left alone.
        let near = Step::WaitUntil { at: 9_000, rank: 0 };
        assert_eq!(
            bound_step(near, &s, 6_000, 5_050, &options(), &mut seen, &mut lost),
            Bounded {
                step: near,
                capped_at: None
            }
        );
        // No lease: the memory is cleared.
        bound_step(
            Step::Challenge,
            &state(&[("me", 2)], None),
            0,
            0,
            &options(),
            &mut seen,
            &mut lost,
        );
        assert_eq!(seen, None);
    }

    #[test]
    fn bound_step_holds_a_challenge_off_after_a_lost_one() {
        let free = state(&[("me", 2)], None);
        let (mut seen, mut lost) = (
            None,
            Some(HoldOff {
                token: T,
                until: 5_000,
            }),
        );
        let b = bound_step(
            Step::Challenge,
            &free,
            1_000,
            0,
            &options(),
            &mut seen,
            &mut lost,
        );
        assert_eq!(b.step, Step::WaitUntil { at: 5_000, rank: 0 });
        assert!(lost.is_some());
        // The hold-off passed: the challenge goes ahead and it is cleared.
        assert_eq!(
            bound_step(
                Step::Challenge,
                &free,
                5_000,
                0,
                &options(),
                &mut seen,
                &mut lost
            )
            .step,
            Step::Challenge
        );
        assert_eq!(lost, None);
        // A newer lease shows: cleared at once.
        let newer = FencingToken {
            producer_epoch: 4,
            ..T
        };
        let led = state(&[("w", 1), ("me", 2)], Some(("w", newer, 1_000, 11_000)));
        let mut lost = Some(HoldOff {
            token: T,
            until: 5_000,
        });
        bound_step(
            Step::WaitUntil {
                at: 11_000,
                rank: 0,
            },
            &led,
            1_000,
            0,
            &options(),
            &mut seen,
            &mut lost,
        );
        assert_eq!(lost, None);
    }
}
