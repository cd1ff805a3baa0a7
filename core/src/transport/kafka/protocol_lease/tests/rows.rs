//! Rows W7, W8, S4, C4, C5, C8, C9, A3, A4 and H3 of the module table of
//! `protocol_lease`, each on fake brokers scripted as in the parent module
//! (A coordinates and leads `t`/0, B only confirms).

use super::*;

/// Kafka's INVALID_PRODUCER_EPOCH: fenced.
const FENCED: i16 = 47;
/// Kafka's TOPIC_AUTHORIZATION_FAILED: a refusal that leaves the epoch
/// usable.
const NO_WRITE: i16 = 29;
/// Kafka's TRANSACTIONAL_ID_AUTHORIZATION_FAILED: a refusal of an EndTxn.
const NO_ID: i16 = 53;

/// Two brokers whose A runs `a` before [`usual`], and logs (and answers
/// with its own code) every EndTxn `a` leaves to it.
fn scripted(
    a: impl Fn(&Request) -> Option<Reply> + Send + Sync + 'static,
) -> (FakeBroker, FakeBroker, EndTxns) {
    let end_txns = EndTxns::default();
    let log = end_txns.clone();
    let (a, b) = two_brokers(
        Box::new(move |r, _| {
            a(r).or_else(|| match r.key() {
                Some(ApiKey::EndTxn) => Some(log.answer(r, 0)),
                _ => None,
            })
        }),
        Box::new(|_, _| None),
    );
    (a, b, end_txns)
}

/// A writer whose attempts give up after `request_timeout` without an
/// answer (the writer of the parent module waits the default 5 s).
fn impatient_writer(bootstrap: &FakeBroker, request_timeout: Duration) -> ProtocolLease {
    let mut settings = krabka_kafka::Settings::new(bootstrap.addr());
    settings.operation_timeout = Duration::from_secs(2);
    settings.connect_timeout = Duration::from_secs(2);
    settings.request_timeout = request_timeout;
    let client = KafkaClient::new(&settings).unwrap();
    ProtocolLease::new(client, TOKEN, DEFAULT_MAX_BATCH)
}

/// Opens a transaction ahead on `u`/0 (not the `t`/0 the writes of the
/// parent module write, so their first write adds `t`/0 itself).
async fn opened_ahead_elsewhere(lease: &mut ProtocolLease) {
    let deadline = Instant::now() + Duration::from_secs(2);
    lease.open_ahead("r", "u", 0, deadline).await;
    assert_eq!(lease.state(), TxnState::Ahead);
}

/// With `ahead`, opens a transaction ahead elsewhere and returns Ahead,
/// the state a write that fails before it sends a record leaves; else
/// `otherwise`, that state from Idle.
async fn ahead_or(lease: &mut ProtocolLease, ahead: bool, otherwise: TxnState) -> TxnState {
    if ahead {
        opened_ahead_elsewhere(lease).await;
        TxnState::Ahead
    } else {
        otherwise
    }
}

/// Row W7: an AddPartitionsToTxn refused (no WRITE on the topic) aborts
/// the transaction it would have joined, at its pin, and the write fails
/// with the refusal; the epoch stays.
#[tokio::test]
async fn w7_an_add_partitions_refused_aborts_the_transaction() {
    let (a, _b, end_txns) = scripted(|r| match r.key() {
        Some(ApiKey::AddPartitionsToTxn) if r.key_index > 0 => {
            Some(fake_broker::error_for(r, NO_WRITE))
        }
        _ => None,
    });
    let mut lease = writer(&a);
    opened_ahead_elsewhere(&mut lease).await;
    let (e, dropped) = failed(write(&mut lease, Duration::from_secs(2)).await);
    assert!(!dropped, "{e}");
    assert!(e.to_string().contains("not authorized to write"), "{e}");
    assert_eq!(lease.state(), TxnState::Idle);
    assert_eq!(
        sent_txn(&a),
        ["AddPartitionsToTxn", "AddPartitionsToTxn", "EndTxn"],
        "no Produce, and the abort at the pin"
    );
    assert_eq!(end_txns.kinds(), ["abort"]);
}

/// Row W8: an AddPartitionsToTxn fenced drops the writer, fenced, without
/// an EndTxn; the state is left as it was (Ahead, Open after W3).
#[tokio::test]
async fn w8_an_add_partitions_fenced_drops_the_writer_unchanged() {
    for ahead in [true, false] {
        let (a, _b, end_txns) = scripted(move |r| match r.key() {
            Some(ApiKey::AddPartitionsToTxn) if r.key_index > 0 => {
                Some(fake_broker::error_for(r, FENCED))
            }
            Some(ApiKey::AddPartitionsToTxn) if r.key_index == 0 && !ahead => {
                Some(fake_broker::error_for(r, FENCED))
            }
            _ => None,
        });
        let mut lease = writer(&a);
        let expected = ahead_or(&mut lease, ahead, TxnState::Open).await;
        let (e, dropped) = failed(write(&mut lease, Duration::from_secs(2)).await);
        assert!(dropped && e.means_fenced(), "ahead {ahead}: {e:?}");
        assert!(!matches!(e, Error::OutcomeUnknown { .. }), "{e:?}");
        assert_eq!(lease.state(), expected, "ahead {ahead}");
        assert!(end_txns.kinds().is_empty(), "ahead {ahead}");
        assert!(!sent_txn(&a).contains(&"Produce".to_owned()));
    }
}

/// Row S4: a write of no records, from Idle or Ahead, is a confirmed
/// DescribeTransactions and nothing else: this epoch current, done; a
/// newer one, dropped fenced; the id unknown or no answer, transient; the
/// state unchanged.
#[tokio::test]
async fn s4_a_write_of_no_records_checks_the_epoch_and_sends_nothing_else() {
    type Describe = fn(&Request) -> Reply;
    let newer = |r: &Request| {
        let newer = FencingToken::new(TOKEN.producer_id, TOKEN.producer_epoch + 1);
        described(r, "Ongoing", newer)
    };
    let cases: [(&str, Describe, Option<&str>, bool); 4] = [
        ("current", |r| described(r, "Empty", TOKEN), None, false),
        ("newer", newer, Some("newer than this epoch"), true),
        (
            "unknown",
            |r| fake_broker::error_for(r, 105),
            Some("does not know the role's transactional id"),
            false,
        ),
        (
            "silent",
            |_| Reply::Silence,
            Some("did not answer in time"),
            false,
        ),
    ];
    for ahead in [false, true] {
        for (case, describe, error, drops) in cases {
            let (a, b, end_txns) = scripted(move |r| match r.key() {
                Some(ApiKey::DescribeTransactions) => Some(describe(r)),
                _ => None,
            });
            let mut lease = writer(&a);
            let expected = ahead_or(&mut lease, ahead, TxnState::Idle).await;
            let before = sent_txn(&a).len();
            let nothing = Write::commit(Content::Lease(Vec::new()));
            let deadline = Instant::now() + Duration::from_millis(500);
            let checked = lease.transact("r", "write_lease", nothing, deadline).await;
            match error {
                None => assert!(checked.is_ok(), "{case}, ahead {ahead}"),
                Some(words) => {
                    let (e, dropped) = failed(checked);
                    assert_eq!(dropped, drops, "{case}, ahead {ahead}: {e}");
                    assert!(e.to_string().contains(words), "{case}, ahead {ahead}: {e}");
                    if drops {
                        assert!(e.means_fenced(), "{case}: {e:?}");
                    } else {
                        assert!(e.is_transient(), "{case}: {e:?}");
                    }
                }
            }
            assert_eq!(lease.state(), expected, "{case}, ahead {ahead}");
            let txn = sent_txn(&a)[before..].to_vec();
            assert!(
                !txn.is_empty() && txn.iter().all(|k| k == "DescribeTransactions"),
                "{case}, ahead {ahead}: {txn:?}"
            );
            assert!(end_txns.kinds().is_empty(), "{case}, ahead {ahead}");
            if case == "current" {
                assert!(
                    sent(&b).contains(&"FindCoordinator".to_owned()),
                    "the answer is confirmed at another broker: {:?}",
                    sent(&b)
                );
            }
        }
    }
}

/// Row C4: an EndTxn(commit) fenced after an earlier try of it went
/// without an answer drops the writer with the outcome unknown: the
/// unanswered try may have committed before the epoch was bumped.
#[tokio::test]
async fn c4_a_commit_fenced_after_a_try_without_an_answer_is_unknown() {
    let end_txns = EndTxns::default();
    let log = end_txns.clone();
    let (a, _b) = two_brokers(
        Box::new(move |r, _| match r.key() {
            Some(ApiKey::EndTxn) if r.key_index == 0 => {
                let _ = log.answer(r, 0);
                Some(Reply::Silence)
            }
            Some(ApiKey::EndTxn) => Some(log.answer(r, FENCED)),
            _ => None,
        }),
        Box::new(|_, _| None),
    );
    let mut lease = impatient_writer(&a, Duration::from_millis(200));
    let (e, dropped) = failed(write(&mut lease, Duration::from_secs(3)).await);
    assert!(dropped, "{e}");
    assert!(matches!(e, Error::OutcomeUnknown { .. }), "{e:?}");
    assert!(e.means_fenced(), "{e:?}");
    assert_eq!(end_txns.kinds(), ["commit", "commit"]);
}

/// Row C5: an EndTxn(commit) fenced at its first try drops the writer,
/// fenced, and says nothing was committed (not "outcome unknown").
#[tokio::test]
async fn c5_a_commit_fenced_at_the_first_try_drops_the_writer() {
    let (a, _b, end_txns) = scripted(|r| match r.key() {
        Some(ApiKey::EndTxn) => Some(fake_broker::end_txn(r, FENCED)),
        _ => None,
    });
    let mut lease = writer(&a);
    let (e, dropped) = failed(write(&mut lease, Duration::from_secs(2)).await);
    assert!(dropped, "{e}");
    assert!(matches!(e, Error::Fenced(_)), "{e:?}");
    assert_eq!(
        sent_txn(&a),
        ["AddPartitionsToTxn", "Produce", "EndTxn"],
        "one EndTxn"
    );
    assert!(end_txns.kinds().is_empty(), "answered by the script");
}

/// A commit pending with nothing pinned, as crafted by rows C8 and C9:
/// what the writer's own steps never leave (see the module table).
fn crafted_commit(lease: &mut ProtocolLease, abort_sent: bool, written: bool) {
    let mut pin = Pin::begin();
    pin.abort_sent = abort_sent;
    if written {
        pin.wrote("t", 0, 7);
    }
    lease.txn = Txn::CommitPending(Open {
        added: HashSet::from([("t".to_owned(), 0)]),
        pin,
    });
}

/// Row C8: a commit whose proof shows its transaction aborted (its abort
/// sent, the coordinator in CompleteAbort, the batch's markers written)
/// fails transient, nothing committed, and leaves the writer idle.
#[tokio::test]
async fn c8_a_commit_proven_aborted_fails_and_leaves_the_writer_idle() {
    let (a, _b, end_txns) = scripted(|r| match r.key() {
        Some(ApiKey::DescribeTransactions) => Some(described(r, "CompleteAbort", TOKEN)),
        Some(ApiKey::ListOffsets) => Some(stable_offset(r, 8)),
        _ => None,
    });
    let mut lease = writer(&a);
    crafted_commit(&mut lease, true, true);
    let deadline = Instant::now() + Duration::from_secs(2);
    let (e, dropped) = failed(lease.commit("r", "write_lease", deadline).await);
    assert!(!dropped, "{e}");
    assert!(e.is_transient(), "{e:?}");
    assert!(
        e.to_string()
            .contains("the transaction was aborted, nothing of it committed"),
        "{e}"
    );
    assert_eq!(lease.state(), TxnState::Idle);
    assert_eq!(sent_txn(&a), ["DescribeTransactions", "ListOffsets"]);
    assert!(end_txns.kinds().is_empty(), "no EndTxn without a pin");
}

/// Row C9: a commit whose proof shows its transaction ended, committed or
/// aborted (no record of it, the coordinator in CompleteCommit), fails
/// with the outcome unknown and leaves the writer idle.
#[tokio::test]
async fn c9_a_commit_proven_ended_either_way_is_unknown_and_idle() {
    let (a, _b, end_txns) = scripted(|r| match r.key() {
        Some(ApiKey::DescribeTransactions) => Some(described(r, "CompleteCommit", TOKEN)),
        _ => None,
    });
    let mut lease = writer(&a);
    crafted_commit(&mut lease, false, false);
    let deadline = Instant::now() + Duration::from_secs(2);
    let (e, dropped) = failed(lease.commit("r", "write_lease", deadline).await);
    assert!(!dropped, "{e}");
    assert!(matches!(e, Error::OutcomeUnknown { .. }), "{e:?}");
    assert!(
        e.to_string().contains("ended, committed or aborted")
            || format!("{e:?}").contains("ended, committed or aborted"),
        "{e:?}"
    );
    assert_eq!(lease.state(), TxnState::Idle);
    assert_eq!(sent_txn(&a), ["DescribeTransactions"]);
    assert!(end_txns.kinds().is_empty());
}

/// Row A3: an EndTxn(abort) at the pin without an answer by the deadline
/// fails transient ("could not be aborted yet") and keeps the abort
/// pending.
#[tokio::test]
async fn a3_an_abort_without_an_answer_stays_pending() {
    let (a, _b, _end_txns) = scripted(|r| match r.key() {
        Some(ApiKey::EndTxn) => Some(Reply::Silence),
        _ => None,
    });
    let mut lease = writer(&a);
    opened_ahead_elsewhere(&mut lease).await;
    let deadline = Instant::now() + Duration::from_millis(300);
    let (e, dropped) = failed(lease.abort_ahead("r", deadline).await);
    assert!(!dropped, "{e}");
    assert!(e.is_transient(), "{e:?}");
    assert!(e.to_string().contains("could not be aborted yet"), "{e}");
    assert_eq!(lease.state(), TxnState::AbortPending);
    assert_eq!(sent_txn(&a), ["AddPartitionsToTxn", "EndTxn"]);
}

/// Row A4: an EndTxn(abort) fenced drops the writer; any other failure
/// fails with it and keeps the abort pending.
#[tokio::test]
async fn a4_an_abort_fenced_drops_the_writer_another_failure_keeps_it_pending() {
    for (code, drops) in [(FENCED, true), (NO_ID, false)] {
        let (a, _b, _end_txns) = scripted(move |r| match r.key() {
            Some(ApiKey::EndTxn) => Some(fake_broker::end_txn(r, code)),
            _ => None,
        });
        let mut lease = writer(&a);
        opened_ahead_elsewhere(&mut lease).await;
        let deadline = Instant::now() + Duration::from_secs(2);
        let (e, dropped) = failed(lease.abort_ahead("r", deadline).await);
        assert_eq!(dropped, drops, "code {code}: {e}");
        if drops {
            assert!(e.means_fenced(), "{e:?}");
        } else {
            assert!(matches!(e, Error::Fatal { .. }), "{e:?}");
            assert!(e.to_string().contains("EndTxn(abort)"), "{e}");
        }
        assert_eq!(lease.state(), TxnState::AbortPending, "code {code}");
        assert_eq!(
            sent_txn(&a),
            ["AddPartitionsToTxn", "EndTxn"],
            "code {code}: one EndTxn"
        );
    }
}

/// Row H3: opening ahead whose AddPartitionsToTxn fails (refused or
/// fenced) is quiet and leaves the writer idle; the next write reports
/// the failure itself.
#[tokio::test]
async fn h3_opening_ahead_that_fails_leaves_the_writer_idle() {
    for code in [NO_WRITE, FENCED] {
        let (a, _b, end_txns) = scripted(move |r| match r.key() {
            Some(ApiKey::AddPartitionsToTxn) => Some(fake_broker::error_for(r, code)),
            _ => None,
        });
        let mut lease = writer(&a);
        open_ahead(&mut lease, Duration::from_secs(2)).await;
        assert_eq!(lease.state(), TxnState::Idle, "code {code}");
        assert_eq!(sent_txn(&a), ["AddPartitionsToTxn"], "code {code}");
        assert!(end_txns.kinds().is_empty(), "code {code}: nothing to abort");
        if code == FENCED {
            let (e, dropped) = failed(write(&mut lease, Duration::from_secs(2)).await);
            assert!(
                dropped && e.means_fenced(),
                "the next write reports it: {e:?}"
            );
        }
    }
}
