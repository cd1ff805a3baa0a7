"""The checker's own test, without Kafka: synthetic logs and events that
break each property must fail its check, and a clean history must pass.
ci/faults.sh runs it before every campaign."""

import json
import os

import checker
import headers
from freeze import lease_key as freeze_key
from roles import _self_test as roles_self_test
from roles import role_partition

ROLE = "faults-000000-r1"


def ev(t, pid, member, event, **fields):
    return {"t": t, "slot": 0, "pid": pid, "role": ROLE, "member": member,
            "line": {"event": event, "member": member, **fields}}


def rec(offset, member, pid, epoch, seq):
    value = json.dumps({"member": member, "producer_id": pid, "epoch": epoch, "seq": seq}).encode()
    return (offset, member.encode(), value)


def clean():
    events = [
        ev(1.0, 10, "a", "elected", producer_id=7, epoch=0),
        ev(1.1, 10, "a", "guarded_write", seq=1, result="ok"),
        ev(1.2, 10, "a", "guarded_write", seq=2, result="ok"),
        ev(2.0, 10, "a", "renewed"),
        ev(3.0, 10, "a", "process_exit", code=-9),
        ev(9.0, 11, "b", "elected", producer_id=7, epoch=2),
        ev(9.1, 11, "b", "guarded_write", seq=1, result="ok"),
        ev(9.2, 11, "b", "guarded_write", seq=2, result="fenced", kind="FENCED"),
    ]
    records = [rec(0, "a", 7, 0, 1), rec(2, "a", 7, 0, 2), rec(4, "b", 7, 2, 1)]
    batches = [(0, 0, 7, 0), (2, 2, 7, 0), (4, 4, 7, 2)]
    leases = [(0, "a", (7, 0)), (5, "b", (7, 2))]
    return events, records, batches, leases


def run(events, records, batches, leases, healed=True, steady=False, more_faults=()):
    run = {"roles": [ROLE], "lease_ms": 5000, "stop_t": 20.0, "steady": [ROLE] if steady else [],
           "timing": {ROLE: (5000, 1000)}, "members": {ROLE: 2}, "stagger_ms": 1000, "partitions": 16}
    faults = [{"t": 2.5, "kind": "member_kill", "status": "injected"}, *more_faults]
    data = {ROLE: {"records": records, "settled": True, "lso": 6, "hw": 6}}
    checks, figures = checker.analyse(run, events, faults, data, {ROLE: leases}, {ROLE: healed}, {ROLE: batches})
    return {c.name.split(": ", 1)[-1]: c for c in checks}, figures


def failed(checks):
    return sorted(name for name, c in checks.items() if not c.passed)


def main():
    roles_self_test()
    events, records, batches, leases = clean()
    checks, figures = run(events, records, batches, leases)
    assert failed(checks) == [], failed(checks)
    assert figures["elections"] == 2 and figures["records"] == 3
    # a: last renewal at 2.0, killed at 3.0 -> covered until 3.0; b elected at 9.0
    assert figures["roles"][ROLE]["longest_leaderless_s"] == 6.0, figures["roles"][ROLE]
    # the bound: lease 5 + stagger 1 x (2 members - 1) + slack 2 = 8 s; the 6 s gap is within it
    assert figures["roles"][ROLE]["bound_s"] == 8.0 and figures["roles"][ROLE]["over_bound"] == 0

    # the steady role: a leader that renews until the stop passes
    steady = [ev(1.0, 10, "a", "elected", producer_id=7, epoch=0)] + [
        ev(1.0 + 3 * i, 10, "a", "renewed") for i in range(1, 7)] + [
        ev(20.5, 10, "a", "resigned")]
    assert failed(run(steady, [rec(0, "a", 7, 0, 1)], [(0, 0, 7, 0)], [(0, "a", (7, 0))], steady=True)[0]) == []
    steady_ok = [ev(1.0, 10, "a", "elected", producer_id=7, epoch=0),
                 ev(1.1, 10, "a", "guarded_write", seq=1, result="ok")] + [
        ev(1.0 + 3 * i, 10, "a", "renewed") for i in range(1, 7)]
    assert failed(run(steady_ok, [rec(0, "a", 7, 0, 1)], [(0, 0, 7, 0)], [(0, "a", (7, 0))], steady=True)[0]) == []
    # ... and fails when its leader was deposed, or when it was elected again
    e, r, b, le = clean()
    assert failed(run(e, r, b, le, steady=True)[0]) == ["healthy leader kept"]
    deposed = steady_ok[:4] + [ev(11.0, 10, "a", "lease_expired")]
    assert failed(run(deposed, [rec(0, "a", 7, 0, 1)], [(0, 0, 7, 0)], [(0, "a", (7, 0))], steady=True)[0]) \
        == ["healthy leader kept"]

    # a failover that waited for a frozen neighbour of its state partition
    def freeze(t, thawed):
        return {"t": t, "kind": "neighbour_freeze", "status": "injected", "tid": "n",
                "partition": role_partition(ROLE, 16), "thawed_t": thawed}
    e, r, b, le = clean()
    late = [x for x in e if x["t"] < 9.0] + [
        ev(15.0, 11, "b", "elected", producer_id=7, epoch=2), ev(15.1, 11, "b", "guarded_write", seq=1, result="ok")]
    assert failed(run(late, r, b, le, more_faults=[freeze(2.0, 14.0)])[0]) == ["failover beside a frozen neighbour"]
    # ... not when the gap ended apart from the abort, or the freeze was elsewhere
    assert failed(run(late, r, b, le, more_faults=[freeze(2.0, 5.0)])[0]) == []
    other = dict(freeze(2.0, 14.0), partition=role_partition(ROLE, 16) + 1)
    assert failed(run(late, r, b, le, more_faults=[other])[0]) == []
    assert failed(run(e, r, b, le, more_faults=[freeze(2.0, 8.5)])[0]) == [], "a gap within the bound"
    broker = {"t": 4.0, "kind": "broker_kill", "status": "injected", "seconds": 5.0}
    assert failed(run(late, r, b, le, more_faults=[freeze(2.0, 14.0), broker])[0]) == [], "a broker fault's gap"
    # the frozen record's key is the golden lease key
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "golden", "records.json")) as fh:
        golden = json.load(fh)
    vectors = golden["cases"]
    lease = next(v for v in vectors if v.get("name") == "lease key")
    assert freeze_key(lease["role"]).hex() == lease["hex"], freeze_key(lease["role"]).hex()

    # the slow role: hand-overs that complete, a leader kept between them
    def slow_run(events, handovers, faults=(), expected=True):
        run_ = {"roles": [ROLE], "lease_ms": 5000, "stop_t": 20.0, "steady": [], "slow": [ROLE],
                "timing": {ROLE: (40000, 3000)}, "members": {ROLE: 2}, "stagger_ms": 1000, "partitions": 16,
                "handovers_expected": expected}
        data = {ROLE: {"records": [rec(0, "a", 7, 0, 1)], "settled": True, "lso": 1, "hw": 1}}
        checks, figures = checker.analyse(run_, events, [{"t": 0.5, "kind": "member_kill", "status": "injected"},
                                                         *faults],
                                          data, {ROLE: [(0, "a", (7, 0))]}, {ROLE: True}, {}, handovers)
        return {c.name.split(": ", 1)[-1]: c for c in checks}, figures

    def writes(pid, member, start, end, every=0.5):
        n = int((end - start) / every)
        return [ev(start + 0.1 + every * i, pid, member, "guarded_write", seq=i, result="ok") for i in range(n)]
    slow_ok = ([ev(1.0, 10, "a", "elected", producer_id=7, epoch=0)] + writes(10, "a", 1.0, 8.0)
               + [ev(8.0, 10, "a", "resigning"), ev(8.3, 10, "a", "resigned", took_ms=300),
                  ev(8.9, 11, "b", "elected", producer_id=7, epoch=1)] + writes(11, "b", 8.9, 19.8))
    # guarded records: only the first one is in the log; the outcomes check
    # is not what this part tests
    asked = [{"t": 8.0, "member": "a", "pid": 10}]
    checks, figures = slow_run(slow_ok, asked)
    slow_failed = lambda c: sorted(n for n in failed(c) if n.startswith("slow network"))  # noqa: E731
    assert slow_failed(checks) == [], failed(checks)
    assert figures["slow"][ROLE]["handovers"] == 1 and figures["slow"][ROLE]["handover_s"]["p50"] == 0.9
    # a resign that failed, or a successor that came only with the lease
    bad = [x if x["line"]["event"] != "resigned" else ev(8.3, 10, "a", "resign_failed", error="x") for x in slow_ok]
    assert slow_failed(slow_run(bad, asked)[0]) == ["slow network: hand-overs complete"]
    late = [x for x in slow_ok if x["pid"] != 11] + [ev(19.0, 11, "b", "elected", producer_id=7, epoch=1)]
    assert "slow network: hand-overs complete" in slow_failed(slow_run(late, asked)[0])
    # a leader deposed between hand-overs, or leaderless without a hand-over
    deposed = ([x for x in slow_ok if x["pid"] == 10 and x["t"] < 3.5] + [ev(3.5, 10, "a", "lease_expired")]
               + [ev(4.0, 11, "b", "elected", producer_id=7, epoch=1)] + writes(11, "b", 4.0, 19.8))
    assert slow_failed(slow_run(deposed, [], expected=False)[0]) == ["slow network: leader kept"]
    assert slow_failed(slow_run(deposed, [])[0]) == ["slow network: hand-overs complete", "slow network: leader kept"]
    # writes that stopped for longer than the bound while it led
    stalled = [x for x in slow_ok if not (x["pid"] == 11 and x["line"]["event"] == "guarded_write" and x["t"] < 19.5)]
    assert slow_failed(slow_run(stalled, asked)[0]) == ["slow network: guarded writes go on"]
    # ... unless a broker fault explains the stretch
    assert slow_failed(slow_run(stalled, asked, [{"t": 9.0, "kind": "broker_kill", "status": "injected",
                                                  "seconds": 5.0}])[0]) == []

    # writes resume after each broker of a rolling restart came back
    roll = {"t": 2.0, "kind": "rolling_restart", "status": "injected", "seconds": 6.0,
            "steps": [{"node": 1, "back_t": 3.0, "ok": True}, {"node": 2, "back_t": 5.0, "ok": True}]}
    assert slow_failed(slow_run(slow_ok, asked, [roll])[0]) == []
    assert checker.check_resume(checker.writes_of(slow_ok, ROLE), [roll], 20.0)[0] == []
    gone = [w for w in checker.writes_of(slow_ok, ROLE) if not 5.0 < w["t"] < 20.5]
    assert len(checker.check_resume(gone, [roll], 30.0)[0]) == 1
    upgraded = dict(roll, kind="rolling_upgrade", finalized_t=9.5)
    assert len(checker.check_resume(gone, [upgraded], 30.0)[0]) == 2

    # a record from the older token after a newer one appeared
    e, r, b, le = clean()
    r.append(rec(6, "a", 7, 0, 3))
    b.append((6, 6, 7, 0))
    e.insert(3, ev(1.3, 10, "a", "guarded_write", seq=3, result="ok"))
    assert failed(run(e, r, b, le)[0]) == ["token order"]
    # a token compared as a pair: a newer producer id wins over a higher epoch
    e, r, b, le = clean()
    e.append(ev(12.0, 12, "c", "elected", producer_id=8, epoch=0))
    r.append(rec(6, "c", 8, 0, 1))
    b.append((6, 6, 8, 0))
    r.append(rec(8, "b", 7, 5, 9))
    b.append((8, 8, 7, 5))
    e.append(ev(12.5, 11, "b", "elected", producer_id=7, epoch=5))
    assert failed(run(e, r, b, le)[0]) == ["token order"]
    # a token nobody was elected with
    e, r, b, le = clean()
    r[2] = rec(4, "b", 7, 3, 1)
    b[2] = (4, 4, 7, 3)
    assert "provenance" in failed(run(e, r, b, le)[0])
    # the broker wrote the batch with another epoch than the value tells
    e, r, b, le = clean()
    b[2] = (4, 4, 7, 3)
    assert failed(run(e, r, b, le)[0]) == ["batch headers"]
    # a write reported ok that is not committed; a fenced one that is
    e, r, b, le = clean()
    del r[1]
    del b[1]
    assert failed(run(e, r, b, le)[0]) == ["write outcomes"]
    e, r, b, le = clean()
    r.append(rec(6, "b", 7, 2, 2))
    b.append((6, 6, 7, 2))
    assert failed(run(e, r, b, le)[0]) == ["write outcomes"]
    # one token elected twice
    e, r, b, le = clean()
    e.append(ev(15.0, 13, "c", "elected", producer_id=7, epoch=2))
    assert failed(run(e, r, b, le)[0]) == ["one term per token"]
    # leases out of order, or from a token its member never won
    e, r, b, le = clean()
    le.append((7, "a", (7, 0)))
    assert failed(run(e, r, b, le)[0]) == ["lease order"]
    # nothing committed, no leader after healing
    e, r, b, le = clean()
    assert "committed records" in failed(run([], [], [], [], healed=False)[0])
    assert "leader after healing" in failed(run(e, r, b, le, healed=False)[0])
    # the pipeline: each input's output once, in order, and the group's offset at the input's end
    def out(offset, in_offset):
        return (offset, None, json.dumps({"in_offset": in_offset}).encode())

    good = [out(0, 0), out(1, 1), out(3, 2)]
    assert checker.check_pipe(good, {"inputs": [0, 1, 2], "committed": 3}) == []
    assert checker.check_pipe([out(0, 0), out(1, 1), out(3, 1), out(4, 2)],
                              {"inputs": [0, 1, 2], "committed": 3})  # an input replayed
    assert checker.check_pipe([out(0, 0), out(1, 2)], {"inputs": [0, 1, 2], "committed": 3})  # skipped
    assert checker.check_pipe([out(0, 1), out(1, 0), out(2, 2)],
                              {"inputs": [0, 1, 2], "committed": 3})  # out of order
    assert checker.check_pipe(good, {"inputs": [0, 1, 2], "committed": 2})  # offsets not at the end
    # the header reader's batch line
    line = ("baseOffset: 4 lastOffset: 6 count: 3 baseSequence: 0 lastSequence: 2 producerId: 7 "
            "producerEpoch: 2 partitionLeaderEpoch: 0 isTransactional: true isControl: false position: 0")
    m = headers.BATCH.search(line)
    assert m and m.groups() == ("4", "6", "7", "2", "false"), m
    print("faults: the checker's self-test passed (every check fails on a history that breaks it)")


if __name__ == "__main__":
    main()
