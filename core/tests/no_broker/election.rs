//! Table tests of the election step and its options.

use std::time::Duration;

use krabka_coordination::{
    challenger_rank, encode_key, encode_lease, encode_registration, evaluate, ElectionOptions,
    Error, FencingToken, Key, Lease, Record, Registration, RoleState, Step,
};

const ROLE: &str = "orders";

/// One record of a test log, encoded with the real codec.
#[derive(Clone, Copy)]
enum Op {
    /// A registration of a member with its `registered_at`.
    Reg(&'static str, i64),
    /// A registration tombstone.
    Dereg(&'static str),
    /// A lease: member, producer id, epoch, granted_at, deadline.
    Lease(&'static str, i64, i16, i64, i64),
    /// A lease tombstone.
    Clear,
    /// A registration of another role (must change nothing).
    Other(&'static str),
}

fn state(ops: &[Op]) -> RoleState {
    let records: Vec<Record> = ops
        .iter()
        .enumerate()
        .map(|(i, op)| {
            let (key, value) = match *op {
                Op::Reg(m, at) => (
                    Key::registration(ROLE, m),
                    Some(
                        encode_registration(&Registration {
                            member: m.into(),
                            registered_at: at,
                        })
                        .unwrap(),
                    ),
                ),
                Op::Dereg(m) => (Key::registration(ROLE, m), None),
                Op::Lease(m, pid, epoch, granted_at, deadline) => (
                    Key::lease(ROLE),
                    Some(
                        encode_lease(&Lease {
                            member: m.into(),
                            token: FencingToken::new(pid, epoch),
                            granted_at,
                            deadline,
                        })
                        .unwrap(),
                    ),
                ),
                Op::Clear => (Key::lease(ROLE), None),
                Op::Other(m) => (
                    Key::registration("billing", m),
                    Some(
                        encode_registration(&Registration {
                            member: m.into(),
                            registered_at: 0,
                        })
                        .unwrap(),
                    ),
                ),
            };
            Record {
                offset: i as i64,
                key: encode_key(&key).unwrap(),
                value,
            }
        })
        .collect();
    RoleState::build(ROLE, &records).unwrap()
}

fn tok(pid: i64, epoch: i16) -> Option<FencingToken> {
    Some(FencingToken::new(pid, epoch))
}

fn wait(at: i64, rank: usize) -> Step {
    Step::WaitUntil { at, rank }
}

struct Case {
    name: &'static str,
    ops: &'static [Op],
    member: &'static str,
    held: Option<FencingToken>,
    now: i64,
    want: Step,
}

fn run(cases: &[Case], options: &ElectionOptions) {
    let mut failures = Vec::new();
    for c in cases {
        let got = evaluate(&state(c.ops), c.member, c.held, c.now, options);
        if got != c.want {
            failures.push(format!(
                "{}: member {} at {}: got {:?}, want {:?}",
                c.name, c.member, c.now, got, c.want
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

// Defaults: 10 s renew interval, 5 s stagger.
const H: i64 = 31_000; // the holder's deadline in most cases

const LIVE: &[Op] = &[
    Op::Reg("a", 1_000),
    Op::Reg("b", 1_100),
    Op::Reg("c", 1_200),
    Op::Lease("a", 7, 0, 21_000, H),
];

const FOUR_CHALLENGERS: &[Op] = &[
    Op::Reg("r0", 1_000),
    Op::Reg("holder", 900),
    Op::Reg("r1", 1_100),
    Op::Other("x"),
    Op::Reg("r2", 1_200),
    Op::Reg("r3", 1_300),
    Op::Lease("holder", 7, 0, 21_000, H),
];

#[test]
fn fresh_role() {
    run(
        &[
            Case {
                name: "empty log",
                ops: &[],
                member: "a",
                held: None,
                now: 0,
                want: Step::Register,
            },
            Case {
                name: "another role's records only",
                ops: &[Op::Other("a")],
                member: "a",
                held: None,
                now: 0,
                want: Step::Register,
            },
            Case {
                name: "first member, no lease",
                ops: &[Op::Reg("a", 1_000)],
                member: "a",
                held: None,
                now: 1_000,
                want: Step::Challenge,
            },
            Case {
                name: "second member waits one stagger after its own registration",
                ops: &[Op::Reg("a", 1_000), Op::Reg("b", 1_100)],
                member: "b",
                held: None,
                now: 1_100,
                want: wait(6_100, 1),
            },
            Case {
                name: "a rank-0 member that registered and died does not block the role",
                ops: &[Op::Reg("a", 1_000), Op::Reg("b", 1_100)],
                member: "b",
                held: None,
                now: 6_100,
                want: Step::Challenge,
            },
            Case {
                name: "third member waits two staggers",
                ops: &[
                    Op::Reg("a", 1_000),
                    Op::Reg("b", 1_100),
                    Op::Reg("c", 1_200),
                ],
                member: "c",
                held: None,
                now: 2_000,
                want: wait(11_200, 2),
            },
        ],
        &ElectionOptions::default(),
    );
}

#[test]
fn live_holder() {
    run(
        &[
            Case {
                name: "rank 0 waits for the deadline",
                ops: LIVE,
                member: "b",
                held: None,
                now: 25_000,
                want: wait(H, 0),
            },
            Case {
                name: "rank 1 waits one stagger more",
                ops: LIVE,
                member: "c",
                held: None,
                now: 25_000,
                want: wait(H + 5_000, 1),
            },
            Case {
                name: "unregistered member registers",
                ops: LIVE,
                member: "d",
                held: None,
                now: 25_000,
                want: Step::Register,
            },
            Case {
                name: "holder renews at granted + interval",
                ops: LIVE,
                member: "a",
                held: tok(7, 0),
                now: 25_000,
                want: Step::RenewAt(31_000),
            },
        ],
        &ElectionOptions::default(),
    );
}

#[test]
fn expired_holder_seen_by_ranks_0_to_3() {
    let mut cases = Vec::new();
    // The holder sits at roster position 1; it is not a challenger, so r1 is rank 1.
    for (rank, member) in ["r0", "r1", "r2", "r3"].into_iter().enumerate() {
        let at = H + 5_000 * rank as i64;
        cases.push(Case {
            name: "one millisecond before its turn",
            ops: FOUR_CHALLENGERS,
            member,
            held: None,
            now: at - 1,
            want: wait(at, rank),
        });
        cases.push(Case {
            name: "at its turn",
            ops: FOUR_CHALLENGERS,
            member,
            held: None,
            now: at,
            want: Step::Challenge,
        });
        cases.push(Case {
            name: "long after",
            ops: FOUR_CHALLENGERS,
            member,
            held: None,
            now: H + 60_000,
            want: Step::Challenge,
        });
    }
    // At one instant, 7 s past the deadline: ranks 0 and 1 challenge, 2 and 3 wait.
    for (member, want) in [
        ("r0", Step::Challenge),
        ("r1", Step::Challenge),
        ("r2", wait(H + 10_000, 2)),
        ("r3", wait(H + 15_000, 3)),
    ] {
        cases.push(Case {
            name: "7 s past the deadline",
            ops: FOUR_CHALLENGERS,
            member,
            held: None,
            now: H + 7_000,
            want,
        });
    }
    run(&cases, &ElectionOptions::default());
}

#[test]
fn holder_that_deregistered_is_not_challenged_before_its_lease_could_have_expired() {
    const OPS: &[Op] = &[
        Op::Reg("a", 1_000),
        Op::Reg("b", 1_100),
        Op::Reg("c", 1_200),
        Op::Lease("a", 7, 0, 21_000, H),
        Op::Dereg("a"),
    ];
    run(
        &[
            Case {
                name: "rank 0 waits for the deadline: the holder may still be live",
                ops: OPS,
                member: "b",
                held: None,
                now: 22_000,
                want: wait(H, 0),
            },
            Case {
                name: "rank 0 challenges at the deadline",
                ops: OPS,
                member: "b",
                held: None,
                now: H,
                want: Step::Challenge,
            },
            Case {
                name: "rank 1 still waits for deadline + stagger",
                ops: OPS,
                member: "c",
                held: None,
                now: 22_000,
                want: wait(H + 5_000, 1),
            },
            Case {
                name: "rank 1 challenges at deadline + stagger",
                ops: OPS,
                member: "c",
                held: None,
                now: H + 5_000,
                want: Step::Challenge,
            },
        ],
        &ElectionOptions::default(),
    );
}

#[test]
fn lease_of_a_member_missing_from_the_roster() {
    const OPS: &[Op] = &[
        Op::Lease("ghost", 3, 2, 21_000, H),
        Op::Reg("b", 1_100),
        Op::Reg("c", 1_200),
        Op::Reg("d", 1_300),
    ];
    run(
        &[
            Case {
                name: "rank 0 waits for the ghost's deadline",
                ops: OPS,
                member: "b",
                held: None,
                now: 0,
                want: wait(H, 0),
            },
            Case {
                name: "rank 1",
                ops: OPS,
                member: "c",
                held: None,
                now: 0,
                want: wait(H + 5_000, 1),
            },
            Case {
                name: "rank 2",
                ops: OPS,
                member: "d",
                held: None,
                now: H + 9_999,
                want: wait(H + 10_000, 2),
            },
        ],
        &ElectionOptions::default(),
    );
}

#[test]
fn recovered_member_is_ranked_last_and_does_not_fail_back() {
    // a led, died; b took over with a newer token; a came back and registered again.
    const OPS: &[Op] = &[
        Op::Reg("a", 1_000),
        Op::Reg("b", 1_100),
        Op::Reg("c", 1_200),
        Op::Lease("a", 7, 0, 21_000, H),
        Op::Lease("b", 7, 1, 40_000, 70_000),
        Op::Reg("a", 45_000),
    ];
    let s = state(OPS);
    assert_eq!(s.rank_of("a"), Some(2));
    assert_eq!(challenger_rank(&s, "a"), Some(1));
    assert_eq!(challenger_rank(&s, "c"), Some(0));
    assert_eq!(
        challenger_rank(&s, "b"),
        None,
        "the holder is not a challenger"
    );
    run(
        &[
            Case {
                name: "the recovered member waits behind c",
                ops: OPS,
                member: "a",
                held: None,
                now: 45_000,
                want: wait(75_000, 1),
            },
            Case {
                name: "c is next in line",
                ops: OPS,
                member: "c",
                held: None,
                now: 45_000,
                want: wait(70_000, 0),
            },
            Case {
                name: "the new leader keeps renewing",
                ops: OPS,
                member: "b",
                held: tok(7, 1),
                now: 45_000,
                want: Step::RenewAt(50_000),
            },
        ],
        &ElectionOptions::default(),
    );
}

#[test]
fn previous_incarnation_of_this_member_holds_the_lease() {
    const OPS: &[Op] = &[
        Op::Reg("a", 1_000),
        Op::Reg("b", 1_100),
        Op::Lease("b", 7, 0, 21_000, H),
        Op::Reg("b", 22_000), // b restarted and registered again
    ];
    run(
        &[
            Case {
                name: "a restarted member waits at the tail: no failback, and a live twin is never fenced before its deadline",
                ops: OPS,
                member: "b",
                held: None,
                now: 22_000,
                want: wait(H + 5_000, 1),
            },
            Case {
                name: "a still waits for the deadline",
                ops: OPS,
                member: "a",
                held: None,
                now: 22_000,
                want: wait(H, 0),
            },
            Case {
                name: "not registered yet: register first",
                ops: &[Op::Lease("b", 7, 0, 21_000, H)],
                member: "b",
                held: None,
                now: 22_000,
                want: Step::Register,
            },
        ],
        &ElectionOptions::default(),
    );
}

#[test]
fn no_lease_after_a_resign_waits_from_the_cleared_deadline() {
    const OPS: &[Op] = &[
        Op::Reg("a", 1_000),
        Op::Reg("b", 1_100),
        Op::Reg("c", 1_200),
        Op::Lease("a", 7, 0, 21_000, H),
        Op::Clear,
        Op::Dereg("a"),
    ];
    run(
        &[
            Case {
                name: "rank 0 takes over at once",
                ops: OPS,
                member: "b",
                held: None,
                now: 22_000,
                want: Step::Challenge,
            },
            Case {
                name: "rank 1 waits from the cleared deadline, not its registration",
                ops: OPS,
                member: "c",
                held: None,
                now: 22_000,
                want: wait(H + 5_000, 1),
            },
        ],
        &ElectionOptions::default(),
    );
}

#[test]
fn clock_skew_moves_the_failover_by_the_skew_and_nothing_else() {
    // The holder wrote deadline H with its clock. The challenger's clock reads
    // the holder's time plus `skew`. The challenger (rank 0) challenges when its
    // own clock reaches H, i.e. at holder time H - skew.
    for skew in [-3_000_i64, -1, 0, 1, 2_500] {
        let cases = [
            Case {
                name: "just before the skewed failover",
                ops: LIVE,
                member: "b",
                held: None,
                now: (H - skew - 1) + skew,
                want: wait(H, 0),
            },
            Case {
                name: "at the skewed failover",
                ops: LIVE,
                member: "b",
                held: None,
                now: (H - skew) + skew,
                want: Step::Challenge,
            },
            Case {
                name: "rank 1 just before its skewed turn",
                ops: LIVE,
                member: "c",
                held: None,
                now: (H + 5_000 - skew - 1) + skew,
                want: wait(H + 5_000, 1),
            },
        ];
        run(&cases, &ElectionOptions::default());
    }
    // Concretely: at holder time 29_500 (before the deadline), a challenger
    // 2 s ahead already challenges, and one 2 s behind still waits at 32_000.
    let s = state(LIVE);
    let o = ElectionOptions::default();
    assert_eq!(evaluate(&s, "b", None, 29_500 + 2_000, &o), Step::Challenge);
    assert_eq!(evaluate(&s, "b", None, 29_500, &o), wait(H, 0));
    assert_eq!(evaluate(&s, "b", None, 32_000 - 2_000, &o), wait(H, 0));
    assert_eq!(evaluate(&s, "b", None, 32_000, &o), Step::Challenge);
}

#[test]
fn held_token() {
    const MINE: &[Op] = &[
        Op::Reg("a", 1_000),
        Op::Reg("b", 1_100),
        Op::Lease("a", 7, 3, 21_000, H),
    ];
    run(
        &[
            Case {
                name: "our lease read back: renew at granted + interval",
                ops: MINE,
                member: "a",
                held: tok(7, 3),
                now: 22_000,
                want: Step::RenewAt(31_000),
            },
            Case {
                name: "renew time already passed: the instant is still granted + interval",
                ops: MINE,
                member: "a",
                held: tok(7, 3),
                now: 40_000,
                want: Step::RenewAt(31_000),
            },
            Case {
                name: "no lease yet: renew now",
                ops: &[Op::Reg("a", 1_000)],
                member: "a",
                held: tok(7, 3),
                now: 22_000,
                want: Step::RenewAt(22_000),
            },
            Case {
                name: "no lease after a tombstone: renew now",
                ops: &[Op::Reg("a", 1_000), Op::Lease("a", 7, 2, 1, 2), Op::Clear],
                member: "a",
                held: tok(7, 3),
                now: 22_000,
                want: Step::RenewAt(22_000),
            },
            Case {
                name: "our older lease (new epoch not read back): renew now",
                ops: MINE,
                member: "a",
                held: tok(7, 4),
                now: 22_000,
                want: Step::RenewAt(22_000),
            },
            Case {
                name: "the deposed holder's older lease (ours not read back): renew now",
                ops: MINE,
                member: "b",
                held: tok(7, 4),
                now: 22_000,
                want: Step::RenewAt(22_000),
            },
            Case {
                name: "producer id rotation: a new id with epoch 0 is newer",
                ops: &[Op::Reg("a", 1_000), Op::Lease("b", 7, 32_766, 0, H)],
                member: "a",
                held: tok(8, 0),
                now: 22_000,
                want: Step::RenewAt(22_000),
            },
            Case {
                name: "another member holds a newer token: stand down",
                ops: &[
                    Op::Reg("a", 1_000),
                    Op::Reg("b", 1_100),
                    Op::Lease("b", 7, 4, 21_000, H),
                ],
                member: "a",
                held: tok(7, 3),
                now: 22_000,
                want: Step::StandDown,
            },
            Case {
                name: "a newer token under our own name (a newer incarnation): stand down",
                ops: &[Op::Reg("a", 1_000), Op::Lease("a", 7, 4, 21_000, H)],
                member: "a",
                held: tok(7, 3),
                now: 22_000,
                want: Step::StandDown,
            },
            Case {
                name: "a newer producer id outranks a higher epoch: stand down",
                ops: &[Op::Reg("a", 1_000), Op::Lease("b", 8, 0, 21_000, H)],
                member: "a",
                held: tok(7, 32_766),
                now: 22_000,
                want: Step::StandDown,
            },
            Case {
                name: "our token under another member's name: stand down",
                ops: &[Op::Reg("a", 1_000), Op::Lease("b", 7, 3, 21_000, H)],
                member: "a",
                held: tok(7, 3),
                now: 22_000,
                want: Step::StandDown,
            },
            Case {
                name: "a held token is judged by the lease even when deregistered",
                ops: &[Op::Lease("a", 7, 3, 21_000, H)],
                member: "a",
                held: tok(7, 3),
                now: 22_000,
                want: Step::RenewAt(31_000),
            },
        ],
        &ElectionOptions::default(),
    );
}

#[test]
fn options_change_the_instants() {
    let o = ElectionOptions::default()
        .with_challenge_stagger(Duration::from_millis(250))
        .with_renew_interval(Duration::from_secs(2))
        .with_lease_duration(Duration::from_secs(6));
    run(
        &[
            Case {
                name: "rank 3 with a 250 ms stagger",
                ops: FOUR_CHALLENGERS,
                member: "r3",
                held: None,
                now: 0,
                want: wait(H + 750, 3),
            },
            Case {
                name: "renew after 2 s",
                ops: LIVE,
                member: "a",
                held: tok(7, 0),
                now: 0,
                want: Step::RenewAt(23_000),
            },
        ],
        &o,
    );
    let zero = ElectionOptions::default().with_challenge_stagger(Duration::ZERO);
    run(
        &[Case {
            name: "zero stagger: every rank at the deadline",
            ops: FOUR_CHALLENGERS,
            member: "r3",
            held: None,
            now: 0,
            want: wait(H, 3),
        }],
        &zero,
    );
}

#[test]
fn extreme_instants_saturate_instead_of_overflowing() {
    const OPS: &[Op] = &[
        Op::Reg("a", i64::MAX),
        Op::Reg("b", i64::MAX),
        Op::Lease("a", 1, 0, i64::MAX, i64::MAX - 1),
    ];
    let s = state(OPS);
    let o = ElectionOptions::default().with_challenge_stagger(Duration::MAX);
    assert_eq!(evaluate(&s, "b", None, 0, &o), wait(i64::MAX - 1, 0));
    assert_eq!(
        evaluate(&s, "a", tok(1, 0), 0, &ElectionOptions::default()),
        Step::RenewAt(i64::MAX)
    );
    let s = state(&[Op::Reg("a", 0), Op::Reg("b", i64::MAX - 10)]);
    assert_eq!(evaluate(&s, "b", None, 0, &o), wait(i64::MAX, 1));
}

#[test]
fn challenger_rank_skips_the_holder_only() {
    let s = state(FOUR_CHALLENGERS);
    assert_eq!(s.rank_of("holder"), Some(1));
    assert_eq!(challenger_rank(&s, "holder"), None);
    for (i, m) in ["r0", "r1", "r2", "r3"].into_iter().enumerate() {
        assert_eq!(challenger_rank(&s, m), Some(i));
    }
    assert_eq!(challenger_rank(&s, "nobody"), None);
    let no_lease = state(&[Op::Reg("a", 0), Op::Reg("b", 0)]);
    assert_eq!(challenger_rank(&no_lease, "b"), Some(1));
}

#[test]
fn evaluate_agrees_with_challenger_rank() {
    for ops in [LIVE, FOUR_CHALLENGERS] {
        let s = state(ops);
        let holder = s.lease().map(|l| l.member.clone());
        // The holder's own id is not a challenger's (it ranks behind the
        // others when it holds no token).
        for e in s.roster().filter(|e| Some(&e.member) != holder.as_ref()) {
            if let Step::WaitUntil { rank, .. } =
                evaluate(&s, &e.member, None, 0, &ElectionOptions::default())
            {
                assert_eq!(Some(rank), challenger_rank(&s, &e.member), "{}", e.member);
            }
        }
    }
}

#[test]
fn default_options() {
    let o = ElectionOptions::default();
    assert_eq!(o.partitions, 16);
    assert_eq!(o.lease_duration, Duration::from_secs(30));
    assert_eq!(o.renew_interval, Duration::from_secs(10));
    assert_eq!(o.challenge_stagger, Duration::from_secs(5));
    o.validate().unwrap();
    let b = ElectionOptions::default()
        .with_partitions(3)
        .with_lease_duration(Duration::from_secs(9))
        .with_renew_interval(Duration::from_secs(3))
        .with_challenge_stagger(Duration::ZERO);
    assert_eq!(
        b,
        ElectionOptions {
            partitions: 3,
            lease_duration: Duration::from_secs(9),
            renew_interval: Duration::from_secs(3),
            challenge_stagger: Duration::ZERO,
        }
    );
    b.validate().unwrap();
}

fn invalid(o: ElectionOptions) -> String {
    match o.validate() {
        Err(Error::InvalidArgument(m)) => m,
        other => panic!("expected InvalidArgument for {o:?}, got {other:?}"),
    }
}

#[test]
fn validate_names_the_values() {
    let d = ElectionOptions::default;
    let m = invalid(d().with_partitions(0));
    assert!(m.contains("partitions") && m.contains('0'), "{m}");
    let m = invalid(d().with_partitions(-4));
    assert!(m.contains("-4"), "{m}");

    let m = invalid(d().with_lease_duration(Duration::ZERO));
    assert!(m.contains("lease duration") && m.contains("0 ms"), "{m}");
    let m = invalid(d().with_renew_interval(Duration::ZERO));
    assert!(m.contains("renew interval") && m.contains("0 ms"), "{m}");

    let m = invalid(
        d().with_lease_duration(Duration::from_secs(10))
            .with_renew_interval(Duration::from_secs(10)),
    );
    assert!(m.contains("must exceed"), "{m}");
    assert!(m.contains("10 s"), "{m}");
    let m = invalid(
        d().with_lease_duration(Duration::from_secs(4))
            .with_renew_interval(Duration::from_millis(4_500)),
    );
    assert!(m.contains("4 s") && m.contains("4.5 s"), "{m}");

    // Zero stagger and one partition are fine.
    d().with_challenge_stagger(Duration::ZERO)
        .with_partitions(1)
        .validate()
        .unwrap();
}
