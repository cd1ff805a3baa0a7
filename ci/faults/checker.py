"""The checker: what the committed logs and the members' events say.

Input: the members' event lines (stamped on arrival, see members.py), the
faults, and what an independent read_committed reader found in every data
topic and in the roles' state partitions. Output: a list of checks (name,
passed, details) and the figures of the run.

What is checked, per role:
  records      the data topic holds committed guarded records at all
  settled      no transaction was left open on the data topic at the end
  token order  the committed records carry non-decreasing tokens (producer id,
               then epoch) in log order: none from a token after a newer one
  provenance   each committed record carries a token its writer announced in
               an `elected` line (a member cannot write with a token it did
               not win)
  batch headers  the producer id and epoch of the record's batch, as the
               broker wrote them in its log segment, equal the value's token
               (only when the cluster's log directories are on this machine)
  outcomes     a write the member reported `ok` is in the committed log; a
               write reported as failed (any kind but OUTCOME_UNKNOWN) is not
  one term per token  no token was announced by two `elected` lines
  lease order  the role's committed lease records in the state topic carry
               non-decreasing tokens, each one announced by its member
  leader after healing  a member led (elected or renewed) after every fault
               was healed
  healthy leader kept  (the steady role only: its lease follows the
               lease-sizing rule and its members take no fault, so every
               leader it has can reach a majority of the brokers) one
               election, no term ended by a fence or an expired lease, no
               leaderless time before the members were stopped

  slow network: leader kept  (the slow role: its members reach the brokers
               through a slow, lossy network, slownet.py; its lease follows
               the lease-sizing rule and its members take no fault) no term
               ended by a fence or an expired lease, and every leaderless
               time is a hand-over the campaign asked for
  slow network: hand-overs complete  every resign the campaign asked of the
               slow role's leader completed (`resigned`, not `resign_failed`)
               and a successor was elected within HANDOVER_BOUND_S of the
               command (the bound is not applied when a broker fault began
               during the hand-over); at least one hand-over, unless a
               broker fault was in flight at every turn (the upgrade campaign)
  slow network: guarded writes go on  while the slow role had a leader, no
               stretch longer than WRITE_GAP_S without a write reported ok,
               outside the broker faults (from their start to BROKER_SPAN_S
               past their duration)

  writes resume after each restart  (the steady and the slow role, when a
               rolling restart or upgrade ran) a write reported ok within
               RESUME_S after each broker came back, and after the upgrade's
               feature levels were finalized

  failover beside a frozen neighbour  (the roles sharing the state
               partition of a neighbour_freeze fault) no leaderless time
               longer than the role's bound that ended when the frozen
               transaction was aborted: a failover waited for another
               role's transaction

Reported, not checked, per role: the longest leaderless time against the
bound its lease allows (lease + challenge stagger x (members - 1) +
BOUND_SLACK_S), and how many gaps were longer. A gap can be longer for a
reason: a broker fault, or faults on several members of the role at once.
"""

import json

import headers
from members import TERM_ENDS
from roles import role_partition

# Beyond the lease and the stagger of the ranks: a standby's reading and its
# challenge (the mint, the first lease write).
BOUND_SLACK_S = 2.0
# How soon after a frozen neighbour's abort a failover that waited for it
# would end (the abort's markers, a standby's poll and challenge).
THAW_SLACK_S = 3.0
# How long past its duration a broker fault may still delay a failover (the
# broker session, partition and coordinator moves, the restart).
BROKER_SPAN_S = 20.0
BROKER_KINDS = ("broker_kill", "broker_pause", "broker_pause_long", "broker_isolate", "rolling_restart",
                "topic_unwritable", "rolling_upgrade")
# The roles that keep their leader through a rolling restart or upgrade
# must write again within this many seconds after each broker is back (and
# after the upgrade's feature levels were raised).
RESUME_S = 15.0
# The slow role: the longest a hand-over (the resign command to the
# successor's `elected` line) may take, and the longest its leader may go
# without a write reported ok (its writes are 20 to 50 ms apart). A failed
# resign leaves the successor waiting for the lease (40 s by default).
HANDOVER_BOUND_S = 10.0
WRITE_GAP_S = 10.0
# How a term ends when its leader was deposed.
DEPOSED = ("fenced", "lease_expired")


def _token(v):
    return (int(v["producer_id"]), int(v["epoch"]))


def fmt_token(t):
    return f"{t[0]}/{t[1]}"


class Check:
    def __init__(self, name, problems, info=""):
        self.name = name
        self.problems = problems
        self.info = info

    @property
    def passed(self):
        return not self.problems


def terms_of(events, role):
    """The terms of `role`: one dict per `elected` line, with the arrival
    time of the election, of its last renewal and of its end (or None)."""
    terms = []
    current = {}  # pid -> term
    for e in events:
        if e["role"] != role:
            continue
        line = e["line"]
        name = line.get("event")
        pid = e["pid"]
        if name == "elected":
            term = {"member": e["member"], "pid": pid, "token": _token(line), "start": e["t"],
                    "last": e["t"], "end": None, "how": None}
            terms.append(term)
            current[pid] = term
        elif pid in current:
            term = current[pid]
            if name == "renewed":
                term["last"] = e["t"]
            elif name in TERM_ENDS:
                term["end"], term["how"] = e["t"], name
                del current[pid]
    return terms


def leaderless(terms, lease_s, stop_t):
    """Gaps in a role's leadership between its first election and `stop_t`:
    a term covers [elected, min(last renewal + lease, its end)]."""
    spans = []
    for t in terms:
        end = t["last"] + lease_s
        if t["end"] is not None:
            end = min(end, t["end"])
        spans.append((t["start"], min(end, stop_t)))
    spans.sort()
    gaps = []
    if not spans:
        return gaps
    covered = spans[0][1]
    for start, end in spans[1:]:
        if start > covered:
            gaps.append((covered, start))
        covered = max(covered, end)
    if covered < stop_t:
        gaps.append((covered, stop_t))
    return gaps


def check_steady(terms, gaps, stop_t):
    """The steady role's leader is never deposed: one election, no term
    ended by a fence or an expired lease, no leaderless time."""
    problems = []
    if len(terms) != 1:
        problems.append(f"elected {len(terms)} times: " + ", ".join(
            f"{t['member']} at {t['start']:.1f}s" for t in terms))
    for t in terms:
        if t["how"] in DEPOSED and t["end"] is not None and t["end"] <= stop_t:
            problems.append(f"{t['member']} (token {fmt_token(t['token'])}) was deposed at {t['end']:.1f}s "
                            f"({t['how']}; its last renewal at {t['last']:.1f}s)")
    for a, b in gaps:
        problems.append(f"leaderless from {a:.1f}s to {b:.1f}s")
    return problems


def _broker_spans(broker_faults):
    return [(f["t"], f["t"] + f.get("seconds", 60.0) + BROKER_SPAN_S) for f in broker_faults]


def check_slow(role, events, terms, gaps, writes, handovers, broker_faults, stop_t):
    """The slow role: (leader kept, hand-overs complete, writes go on)
    problems, and the figures of its hand-overs and writes."""
    kept, done, flowing = [], [], []
    spans = _broker_spans(broker_faults)
    for t in terms:
        if t["how"] in DEPOSED and t["end"] is not None and t["end"] <= stop_t:
            kept.append(f"{t['member']} (token {fmt_token(t['token'])}) was deposed at {t['end']:.1f}s "
                        f"({t['how']}; its last renewal at {t['last']:.1f}s)")
    by_pid = {}
    for e in events:
        if e["role"] == role:
            by_pid.setdefault(e["pid"], []).append(e)
    elections = sorted(e["t"] for e in events if e["role"] == role and e["line"].get("event") == "elected")
    times, resigns, windows = [], [], []
    for h in handovers:
        after = [e for e in by_pid.get(h["pid"], []) if e["t"] >= h["t"]]
        end = next((e for e in after if e["line"].get("event") in
                    ("resigned", "resign_failed", "not_leader", "fenced", "lease_expired", "process_exit")), None)
        name = end["line"].get("event") if end else None
        if name == "not_leader":
            continue  # its term had ended as the command came: no hand-over
        if name != "resigned":
            done.append(f"the resign asked of {h['member']} at {h['t']:.1f}s did not complete "
                        f"({name or 'no line'}{': ' + str(end['line'].get('error', ''))[:120] if end else ''})")
            continue
        if end["line"].get("took_ms") is not None:
            resigns.append(float(end["line"]["took_ms"]))
        nxt = next((t for t in elections if t > end["t"]), None)
        if nxt is None or nxt > stop_t:
            done.append(f"no successor was elected after {h['member']} resigned at {end['t']:.1f}s "
                        f"(asked at {h['t']:.1f}s)")
            continue
        took = nxt - h["t"]
        windows.append((h["t"], nxt))
        broker = any(h["t"] <= s < nxt for s, _ in spans)
        if took > HANDOVER_BOUND_S and not broker:
            done.append(f"the hand-over from {h['member']} asked at {h['t']:.1f}s took {took:.1f}s "
                        f"(bound {HANDOVER_BOUND_S:g}s)")
        times.append(round(took, 3))
    for a, b in gaps:
        if not any(w0 - 0.5 <= a and b <= w1 + 0.5 for w0, w1 in windows):
            kept.append(f"leaderless from {a:.1f}s to {b:.1f}s, not during a hand-over")
    ok = sorted(w["t"] for w in writes if w["result"] == "ok")
    longest = 0.0
    for t in terms:
        end = min(t["end"] if t["end"] is not None else stop_t, stop_t)
        marks = [t["start"]] + [x for x in ok if t["start"] <= x <= end] + [end]
        for a, b in zip(marks, marks[1:]):
            if any(s < b and a < e for s, e in spans):
                continue
            longest = max(longest, b - a)
            if b - a > WRITE_GAP_S:
                flowing.append(f"{t['member']} (token {fmt_token(t['token'])}) wrote nothing from {a:.1f}s to "
                               f"{b:.1f}s while it led ({b - a:.1f}s, bound {WRITE_GAP_S:g}s)")
    times.sort()
    resigns.sort()

    def pct(xs, q):
        return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else None
    figures = {"handovers": len(times), "handover_s": {"p50": pct(times, 0.5), "max": times[-1] if times else None,
                                                        "all": times},
               "resign_ms": {"p50": pct(resigns, 0.5), "max": resigns[-1] if resigns else None},
               "longest_write_gap_s": round(longest, 2)}
    return kept, done, flowing, figures


def check_resume(writes, faults, stop_t):
    """A write reported ok within RESUME_S after each broker of a rolling
    restart or upgrade came back (and after an upgrade was finalized)."""
    ok = sorted(w["t"] for w in writes if w["result"] == "ok")
    problems, marks = [], []
    for f in faults:
        for st in f.get("steps", []):
            if st.get("ok"):
                marks.append((st["back_t"], f"broker node {st['node']} came back ({f['kind']})"))
        if f.get("finalized_t") is not None:
            marks.append((f["finalized_t"], "the upgrade's feature levels were finalized"))
    for t, what in marks:
        if t + RESUME_S > stop_t:
            continue
        if not any(t < x <= t + RESUME_S for x in ok):
            nxt = next((x for x in ok if x > t), None)
            problems.append(f"no write ok within {RESUME_S:g}s after {what} at {t:.1f}s "
                            f"(the next at {f'{nxt:.1f}s' if nxt is not None else 'never'})")
    return problems, len(marks)


def check_freezes(role, partition, gaps, bound, freezes, broker_faults=()):
    """No gap of `role` longer than `bound` overlapping a freeze of its
    state partition ended when that freeze was aborted (from 1 s before the
    abort was done to THAW_SLACK_S after): the failover waited for the
    neighbour's transaction. A gap that overlaps a broker fault (from its
    start to BROKER_SPAN_S past its duration) is left out: a broker fault
    delays a failover and the abort alike."""
    problems = []
    spans = [(f["t"], f["t"] + f.get("seconds", 60.0) + BROKER_SPAN_S) for f in broker_faults]
    for f in freezes:
        thawed = f.get("thawed_t")
        if f.get("partition") != partition or thawed is None:
            continue
        for a, b in gaps:
            if any(s < b and a < e for s, e in spans):
                continue
            if b - a > bound and a < thawed and f["t"] < b and thawed - 1.0 <= b <= thawed + THAW_SLACK_S:
                problems.append(f"leaderless from {a:.1f}s to {b:.1f}s (bound {bound:.1f}s), ended as the "
                                f"neighbour {f['tid']}'s transaction (frozen at {f['t']:.1f}s) was aborted at "
                                f"{thawed:.1f}s")
    return problems


def check_data(role, records, terms, writes):
    """Token order, provenance and write outcomes of one role's data topic."""
    order, provenance, outcomes = [], [], []
    announced = {}
    for t in terms:
        announced.setdefault(t["member"], set()).add(t["token"])
    best, best_at = None, None
    committed = set()
    for offset, key, value in records:
        try:
            v = json.loads(value)
            tok = _token(v)
            member, seq = v["member"], int(v["seq"])
        except (TypeError, ValueError, KeyError) as e:
            order.append(f"offset {offset}: not a guarded record of the member ({e}): {value!r:.120}")
            continue
        if best is not None and tok < best:
            order.append(f"offset {offset}: {member} wrote seq {seq} with token {fmt_token(tok)} "
                         f"after token {fmt_token(best)} appeared at offset {best_at}")
        elif best is None or tok > best:
            best, best_at = tok, offset
        if tok not in announced.get(member, ()):
            provenance.append(f"offset {offset}: {member} committed seq {seq} with token {fmt_token(tok)}, "
                              f"which it never announced as elected (it announced "
                              f"{sorted(fmt_token(x) for x in announced.get(member, ()))})")
        if (member, tok, seq) in committed:
            order.append(f"offset {offset}: {member} seq {seq} of token {fmt_token(tok)} committed twice")
        committed.add((member, tok, seq))
    unknown_committed = unknown_total = 0
    for w in writes:
        key = (w["member"], w["token"], w["seq"])
        if w["result"] == "ok" and key not in committed:
            outcomes.append(f"{w['member']} reported seq {w['seq']} of token {fmt_token(w['token'])} "
                            f"written (at {w['t']:.1f}s) but it is not in the committed log")
        elif w["result"] != "ok" and w["kind"] == "OUTCOME_UNKNOWN":
            unknown_total += 1
            unknown_committed += key in committed
        elif w["result"] != "ok" and key in committed:
            outcomes.append(f"{w['member']} reported seq {w['seq']} of token {fmt_token(w['token'])} "
                            f"failed ({w['result']}, {w['kind']}) at {w['t']:.1f}s but it is committed")
    return order, provenance, outcomes, (unknown_committed, unknown_total)


def check_pipe(records, pipe):
    """The pipeline role's output against its input: each input's output
    exactly once, in input order, and the group's committed offset at the
    input's end. `pipe`: {"inputs": input offsets, "committed": offset}."""
    problems = []
    outputs = []
    for offset, _, value in records:
        try:
            outputs.append(int(json.loads(value)["in_offset"]))
        except (TypeError, ValueError, KeyError) as e:
            problems.append(f"output offset {offset}: not a pipeline output ({e}): {value!r:.120}")
    inputs = pipe["inputs"]
    if outputs != inputs:
        at = next((i for i, (a, b) in enumerate(zip(outputs, inputs)) if a != b), min(len(outputs), len(inputs)))
        seen, dup = set(), 0
        for o in outputs:
            dup += o in seen
            seen.add(o)
        missing = len(set(inputs) - seen)
        problems.append(f"{len(outputs)} outputs for {len(inputs)} inputs ({dup} repeated, {missing} missing); "
                        f"the first difference at output {at}: {outputs[max(at - 2, 0):at + 3]} where the "
                        f"inputs are {inputs[max(at - 2, 0):at + 3]}")
    want = inputs[-1] + 1 if inputs else None
    if pipe["committed"] != want:
        problems.append(f"the group's committed offset is {pipe['committed']}, not the input's end {want}")
    return problems


def writes_of(events, role):
    """Every `guarded_write` line of `role`, with the token of its term."""
    token_of = {}
    out = []
    for e in events:
        if e["role"] != role:
            continue
        line = e["line"]
        if line.get("event") == "elected":
            token_of[e["pid"]] = _token(line)
        elif line.get("event") == "guarded_write" and e["pid"] in token_of:
            out.append({"member": e["member"], "token": token_of[e["pid"]], "seq": int(line["seq"]),
                        "result": line.get("result"), "kind": line.get("kind"), "t": e["t"]})
    return out


def check_leases(role, leases, terms):
    """Committed lease records of a role: (offset, member, token) in log order."""
    problems = []
    announced = {(t["member"], t["token"]) for t in terms}
    best = None
    for offset, member, tok in leases:
        if best is not None and tok < best:
            problems.append(f"state offset {offset}: lease of {member} with token {fmt_token(tok)} "
                            f"after a lease with token {fmt_token(best)}")
        best = tok if best is None else max(best, tok)
        if (member, tok) not in announced:
            problems.append(f"state offset {offset}: lease of {member} with token {fmt_token(tok)}, "
                            "never announced as elected by that member")
    return problems


def value_tokens(records):
    """offset -> the token a guarded record's value carries."""
    out = {}
    for offset, _, value in records:
        try:
            out[offset] = _token(json.loads(value))
        except (TypeError, ValueError, KeyError):
            pass
    return out


def analyse(run, events, faults, data, leases, healed_leaders, batch_headers, handovers=()):
    """The checks and the figures of a run.

    run: dict with roles, lease_ms, stop_t (when the members were stopped);
    data: role -> {"records", "settled", "lso", "hw"}; leases: role -> list of
    (offset, member, token); healed_leaders: role -> True when a member led
    after everything was healed; batch_headers: role -> data batches of the
    leader's log segments (headers.batches), absent when not readable."""
    checks = []
    figures = {"roles": {}, "faults": {}, "skipped": {}}
    injected = [f for f in faults if f["status"] == "injected"]
    figures["on_leaders"] = {}
    for f in faults:
        bucket = figures["faults"] if f["status"] == "injected" else figures["skipped"]
        bucket[f["kind"]] = bucket.get(f["kind"], 0) + 1
        if f["status"] == "injected" and f.get("leader"):
            figures["on_leaders"][f["kind"]] = figures["on_leaders"].get(f["kind"], 0) + 1
    checks.append(Check("faults injected", [] if injected else ["no fault was injected"],
                        f"{len(injected)} injected"))
    default_lease_s = run["lease_ms"] / 1000.0
    stagger_s = run.get("stagger_ms", 1000) / 1000.0
    steady = set(run.get("steady", ()))
    longest = (0.0, None, None)
    total_records = 0
    for role in run["roles"]:
        terms = terms_of(events, role)
        writes = writes_of(events, role)
        d = data[role]
        records = d["records"]
        total_records += len(records)
        order, provenance, outcomes, (uc, ut) = check_data(role, records, terms, writes)
        short = role.split("-")[2] if role.count("-") >= 2 else role
        checks.append(Check(f"{short}: committed records", [] if records else ["no committed guarded record"],
                            f"{len(records)} records"))
        checks.append(Check(f"{short}: data topic settled", [] if d["settled"] else [
            f"an open transaction holds the last stable offset {d['lso']} below the high watermark {d['hw']}"]))
        checks.append(Check(f"{short}: token order", order))
        checks.append(Check(f"{short}: provenance", provenance))
        if role in batch_headers:
            checks.append(Check(f"{short}: batch headers",
                                headers.check(records, value_tokens(records), batch_headers[role]),
                                f"{len(batch_headers[role])} data batches in the leader's log"))
        checks.append(Check(f"{short}: write outcomes", outcomes,
                            f"{sum(w['result'] == 'ok' for w in writes)} reported ok; "
                            f"{uc} of {ut} with an unknown outcome committed"))
        seen, dup = {}, []
        for t in terms:
            if t["token"] in seen:
                dup.append(f"token {fmt_token(t['token'])} elected twice: {seen[t['token']]} and "
                           f"{t['member']} at {t['start']:.1f}s")
            seen[t["token"]] = f"{t['member']} at {t['start']:.1f}s"
        checks.append(Check(f"{short}: one term per token", dup, f"{len(terms)} elections"))
        if role in run.get("pipes", {}):
            pipe = run["pipes"][role]
            checks.append(Check(f"{short}: pipeline: each input once, in order", check_pipe(records, pipe),
                                f"{len(pipe['inputs'])} inputs fed"
                                + (f"; the feeder lost {len(pipe['feeder_failed'])}" if pipe["feeder_failed"]
                                   else "")))
        checks.append(Check(f"{short}: lease order", check_leases(role, leases.get(role, []), terms),
                            f"{len(leases.get(role, []))} committed leases"))
        checks.append(Check(f"{short}: leader after healing",
                            [] if healed_leaders.get(role) else ["no member led after every fault was healed"]))
        lease_s = run.get("timing", {}).get(role, (run["lease_ms"], None))[0] / 1000.0
        members = run.get("members", {}).get(role, 1)
        bound = lease_s + stagger_s * max(members - 1, 0) + BOUND_SLACK_S
        gaps = leaderless(terms, lease_s, run["stop_t"])
        if role in steady:
            checks.append(Check(f"{short}: healthy leader kept", check_steady(terms, gaps, run["stop_t"]),
                                f"lease {lease_s:g}s, no member faults"))
        if role in run.get("slow", ()):
            kept, done, flowing, slow_fig = check_slow(role, events, terms, gaps, writes, handovers,
                                                       [f for f in injected if f["kind"] in BROKER_KINDS],
                                                       run["stop_t"])
            checks.append(Check(f"{short}: slow network: leader kept", kept,
                                f"lease {lease_s:g}s, {len(terms)} elections"))
            checks.append(Check(f"{short}: slow network: hand-overs complete",
                                done + ([] if slow_fig["handovers"] or not run.get("handovers_expected") else
                                        ["no hand-over was asked and completed"]),
                                f"{slow_fig['handovers']} hand-overs, p50 {slow_fig['handover_s']['p50']}s, "
                                f"max {slow_fig['handover_s']['max']}s"))
            checks.append(Check(f"{short}: slow network: guarded writes go on", flowing,
                                f"{sum(w['result'] == 'ok' for w in writes)} writes ok, longest stretch without "
                                f"one {slow_fig['longest_write_gap_s']}s"))
            figures.setdefault("slow", {})[role] = slow_fig
        rolling = [f for f in injected if f["kind"] in ("rolling_restart", "rolling_upgrade")]
        if rolling and (role in steady or role in run.get("slow", ())):
            problems, n = check_resume(writes, rolling, run["stop_t"])
            checks.append(Check(f"{short}: writes resume after each restart", problems,
                                f"{n} brokers back or finalized"))
        freezes = [f for f in injected if f["kind"] == "neighbour_freeze"]
        if "partitions" in run and any(
                f.get("partition") == role_partition(role, run["partitions"]) for f in freezes):
            mine = [f for f in freezes if f.get("partition") == role_partition(role, run["partitions"])]
            checks.append(Check(f"{short}: failover beside a frozen neighbour",
                                check_freezes(role, role_partition(role, run["partitions"]), gaps, bound, mine,
                                              [f for f in injected if f["kind"] in BROKER_KINDS]),
                                f"{len(mine)} freezes of its state partition"))
        worst = max(gaps, key=lambda g: g[1] - g[0], default=None)
        if worst is not None and worst[1] - worst[0] > longest[0]:
            longest = (worst[1] - worst[0], role, worst)
        figures["roles"][role] = {
            "elections": len(terms),
            "records": len(records),
            "writes_ok": sum(w["result"] == "ok" for w in writes),
            "writes_failed": sum(w["result"] != "ok" for w in writes),
            "longest_leaderless_s": round(worst[1] - worst[0], 2) if worst else 0.0,
            "leaderless_at_s": [round(worst[0], 1), round(worst[1], 1)] if worst else None,
            "bound_s": round(bound, 2),
            "over_bound": sum(b - a > bound for a, b in gaps),
            "lease_s": lease_s,
            "steady": role in steady,
            "slow": role in run.get("slow", ()),
        }
    errors = {}
    for e in events:
        line = e["line"]
        if line.get("event") in ("ended", "resign_failed", "deregister_failed"):
            key = f"{line['event']} {line.get('kind', '')}: {str(line.get('error', ''))[:160]}"
            errors[key] = errors.get(key, 0) + 1
    figures["member_errors"] = errors
    figures["elections"] = sum(r["elections"] for r in figures["roles"].values())
    figures["records"] = total_records
    figures["violations"] = sum(len(c.problems) for c in checks)
    figures["longest_leaderless_s"] = round(longest[0], 2)
    if longest[1] is not None:
        a, b = longest[2]
        figures["longest_leaderless"] = {
            "role": longest[1], "from_s": round(a, 1), "to_s": round(b, 1),
            "faults_around": [f"{f['t']:.1f}s {f['kind']} {f.get('target', '')} {f.get('detail', '')}".strip()
                              for f in injected if a - 2 * default_lease_s - 15 <= f["t"] <= b],
        }
    return checks, figures
