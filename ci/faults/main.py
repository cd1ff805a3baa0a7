"""The fault campaign: member processes of several roles
write guarded records on the 3-broker cluster while a nemesis injects faults;
then everything is healed, the members stop, and the checker reads what was
committed. Run it through ci/faults.sh, which prepares the venv, the member
binary, the clock shim and the cluster.
"""

import argparse
import json
import os
import platform
import secrets
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone

import checker
import headers
import kafka_io
import slownet
from brokers import Brokers
from handovers import Handovers
from isolation import Isolation
from members import Fleet
from nemesis import Nemesis
from roles import pick_roles, role_partition


def log(msg):
    print(f"faults: {msg}", flush=True)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="ci/faults.sh", description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=float, default=100.0, help="seconds of faults (default 100)")
    p.add_argument("--seed", type=int, default=None, help="seed of the nemesis (default: random, printed)")
    p.add_argument("--bootstrap", required=True, help="the 3-broker cluster (ci/faults.sh finds or starts one)")
    p.add_argument("--member-bin", required=True, help="the member binary (set by ci/faults.sh)")
    p.add_argument("--clock-shim", required=True, help="the LD_PRELOAD wall-clock shim (set by ci/faults.sh)")
    p.add_argument("--repo", required=True, help="the repository root (set by ci/faults.sh)")
    p.add_argument("--work-dir", required=True, help="where runs keep their events and report (target/faults)")
    p.add_argument("--members", default="3,3,2", help="members per role, one count per role (default 3,3,2)")
    p.add_argument("--lease-ms", type=int, default=5000, help="the members' lease (default 5000)")
    p.add_argument("--renew-ms", type=int, default=1000, help="the members' renew interval (default 1000)")
    p.add_argument("--stagger-ms", type=int, default=1000, help="the members' challenge stagger (default 1000)")
    p.add_argument("--steady-members", type=int, default=2,
                   help="members of the steady role (default 2; 0: no steady role): a role whose lease follows "
                        "the lease-sizing rule and whose members take no fault, so only the cluster's faults "
                        "reach it, and its leader must never be deposed")
    p.add_argument("--steady-lease-ms", type=int, default=40000,
                   help="the steady role's lease (default 40000: the rule for the campaign's broker pauses of up to "
                        "20 s and cut-off brokers of up to 40 s, which hold a transaction for at most the brokers' "
                        "request.timeout.ms of 30 s: renew + 30 s + 7 s, docs/operations.md)")
    p.add_argument("--steady-renew-ms", type=int, default=3000, help="the steady role's renew interval (default 3000)")
    p.add_argument("--slow-members", type=int, default=2,
                   help="members of the slow role (default 2; 0: no slow role): a role whose members reach the "
                        "brokers through a slow, lossy network (slownet.py: each chunk 20 +/- 10 ms late, 1%% of "
                        "the packets dropped), whose lease follows the lease-sizing rule and whose leader is asked "
                        "to hand over every --handover-every seconds; it must keep its leader between hand-overs, "
                        "and every hand-over must complete")
    p.add_argument("--slow-lease-ms", type=int, default=40000,
                   help="the slow role's lease (default 40000, as the steady role's: it takes the broker faults)")
    p.add_argument("--slow-renew-ms", type=int, default=3000, help="the slow role's renew interval (default 3000)")
    p.add_argument("--slow-delay-ms", type=float, default=20.0, help="the slow network's delay per chunk (default 20)")
    p.add_argument("--slow-jitter-ms", type=float, default=10.0,
                   help="the slow network's jitter: each chunk's delay is uniform in delay +/- jitter (default 10)")
    p.add_argument("--slow-loss", type=float, default=0.01,
                   help="the share of packets dropped each way between a slow member and the brokers (default 0.01)")
    p.add_argument("--handover-every", type=float, default=10.0,
                   help="seconds between two hand-overs asked of the slow role's leader (default 10)")
    p.add_argument("--pipe-members", type=int, default=2,
                   help="members of the pipeline role (default 2; 0: no pipeline role): a role whose leader pipes "
                        "an input topic (fed all through the run) to its data topic, one output per input, the "
                        "input offsets committed in each guarded transaction; it takes the member faults like "
                        "the first roles, and its output must hold each input exactly once, in input order")
    p.add_argument("--pipe-feed-every-ms", type=float, default=20.0,
                   help="milliseconds between two inputs of the pipeline role (default 20)")
    p.add_argument("--gap-min", type=float, default=2.0, help="least seconds between two faults")
    p.add_argument("--gap-max", type=float, default=5.0, help="most seconds between two faults")
    p.add_argument("--kinds", default=None,
                   help="only these fault kinds, comma-separated (default: every kind, see docs/faults.md)")
    p.add_argument("--upgrade-to", default=None,
                   help="the Kafka version the rolling_upgrade kind moves the brokers to (ci/faults.sh --upgrade "
                        "sets it, on a cluster of an older version)")
    p.add_argument("--keep-topics", action="store_true", help="keep the data topics after the run")
    a = p.parse_args(argv)
    a.members_per_role = [int(x) for x in a.members.split(",")]
    if len(a.members_per_role) < 3 or min(a.members_per_role) < 1:
        p.error("--members needs at least three roles of at least one member each")
    if a.kinds is not None:
        from nemesis import KINDS
        known = [k for k, _ in KINDS]
        a.kinds = [k.strip() for k in a.kinds.split(",") if k.strip()]
        unknown = [k for k in a.kinds if k not in known]
        if unknown or not a.kinds:
            p.error(f"--kinds: unknown kind(s) {unknown or a.kinds}; the kinds are {', '.join(known)}")
    if a.steady_members < 0:
        p.error(f"--steady-members must be 0 or more, got {a.steady_members}")
    if a.pipe_members < 0:
        p.error(f"--pipe-members must be 0 or more, got {a.pipe_members}")
    if a.slow_members < 0 or a.slow_members == 1:
        p.error(f"--slow-members must be 0 or at least 2 (a hand-over needs a successor), got {a.slow_members}")
    if not 0 <= a.slow_loss < 0.5:
        p.error(f"--slow-loss must be in [0, 0.5), got {a.slow_loss}")
    a.pipe_feed_every_s = a.pipe_feed_every_ms / 1000.0
    if a.seed is None:
        a.seed = secrets.randbelow(1_000_000)
    return a


def commit(repo):
    """The checked-out commit, with "+changes" when the work tree differs."""
    try:
        head = subprocess.run(["git", "-C", repo, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", repo, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return head + ("+changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def machine():
    cpus = os.cpu_count()
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        pass
    return f"{platform.system()} {platform.release()}, {cpus} cores {model}".strip()


def warn_ephemeral(ports):
    """Broker ports in the kernel's ephemeral range can be taken by a client's
    TCP self-connect while a broker is down: its restart then fails."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
    except (OSError, ValueError):
        return
    inside = [p for p in ports if low <= p <= high]
    if inside:
        log(f"WARNING: broker ports {inside} lie in the ephemeral port range {low}-{high}: a client "
            "reconnecting to a killed broker may connect to itself and hold the port, so the restart fails "
            f"with 'Address already in use' and the broker's peers may stall; use ports below {low}")


def wait_for(cond, within, step=0.25):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(step)
    return cond()


def read_headers(cfg, brokers, topics):
    """role -> the data batches (offsets, producer id, epoch) in the
    partition leader's log segments, or None when they cannot be read."""
    if not brokers.controllable:
        log(f"NOTICE: batch headers are not checked: {brokers.why_not}")
        return {}
    dirs = {}
    for role, topic in topics.items():
        leader = kafka_io.partition_leader(cfg.bootstrap, topic, 0)
        dirs[role] = os.path.join(headers.log_dir(cfg.repo, leader), f"{topic}-0")
    found = headers.batches(cfg.repo, list(dirs.values()))
    return {role: found[d] for role, d in dirs.items()}


def read_logs(cfg, roles, topics, partitions, lease_s):
    """What a read_committed reader finds: the data topics, and the lease
    records of our roles in their state partitions."""
    data = {}
    for role in roles:
        lso, hw, settled = kafka_io.wait_stable(cfg.bootstrap, topics[role], 0, within=2 * lease_s + 60)
        records, end = kafka_io.read_committed(cfg.bootstrap, topics[role], 0)
        data[role] = {"records": records, "settled": settled and end >= hw, "lso": lso, "hw": hw}
        log(f"read {len(records)} committed records of {topics[role]} (end {end}, high watermark {hw})")
    leases = {role: [] for role in roles}
    for part in sorted({role_partition(r, partitions) for r in roles}):
        lso, hw, settled = kafka_io.wait_stable(cfg.bootstrap, kafka_io.STATE_TOPIC, part, within=30)
        if not settled:
            log(f"NOTICE: state partition {part} still has an open transaction; its leases are read up to {lso}")
        records, _ = kafka_io.read_committed(cfg.bootstrap, kafka_io.STATE_TOPIC, part)
        for offset, key, value in records:
            try:
                kind, role, _ = kafka_io.decode_key(key)
            except (ValueError, TypeError):
                continue
            if role in leases and kind == 1 and value:
                member, pid, epoch, _, _ = kafka_io.decode_lease(value)
                leases[role].append((offset, member, (pid, epoch)))
    return data, leases


def report(cfg, roles, checks, figures, started, duration_s, run_dir):
    lead = figures["on_leaders"]
    kinds = ", ".join(f"{k} {n}" + (f" ({lead[k]} on leaders)" if k in lead else "")
                      for k, n in sorted(figures["faults"].items())) or "none"
    skipped = ", ".join(f"{k} {n}" for k, n in sorted(figures["skipped"].items()))
    print("\n=== fault campaign report", flush=True)
    for c in checks:
        print(f"  {'ok  ' if c.passed else 'FAIL'} {c.name}{'  (' + c.info + ')' if c.info else ''}")
        for p in c.problems[:10]:
            print(f"         {p}")
        if len(c.problems) > 10:
            print(f"         ... and {len(c.problems) - 10} more")
    print(f"  roles: {', '.join(roles)} (the first two share state partition "
          f"{role_partition(roles[0], cfg.partitions)} of {cfg.partitions})")
    print(f"  a role's bound: lease + challenge stagger x (members - 1) + {checker.BOUND_SLACK_S:g}s, the time a "
          "standby needs to take over from a leader lost to a member fault; broker faults and faults on "
          "several members of a role can take longer (see docs/faults.md)")
    for role, r in figures["roles"].items():
        print(f"  {role}: {r['elections']} elections, {r['records']} committed records, "
              f"{r['writes_ok']} writes ok / {r['writes_failed']} failed, "
              f"longest leaderless {r['longest_leaderless_s']:.1f}s (its lease allows {r['bound_s']:.1f}s"
              f"{'; ' + str(r['over_bound']) + ' gaps longer' if r['over_bound'] else ''})"
              f"{'; steady (lease ' + str(r['lease_s']) + 's, no member faults)' if r['steady'] else ''}")
    for role, sf in figures.get("slow", {}).items():
        net = figures.get("slow_network", {})
        print(f"  slow network ({role}): {sf['handovers']} hand-overs, command to successor p50 "
              f"{sf['handover_s']['p50']}s, max {sf['handover_s']['max']}s (all: {sf['handover_s']['all']}); "
              f"resign p50 {sf['resign_ms']['p50']} ms, max {sf['resign_ms']['max']} ms; longest stretch "
              f"without a write ok {sf['longest_write_gap_s']}s; network: {net}")
    print(f"  member exits by code: {figures['exits']} (-9 killed, 0 stopped, 1 error, 3 fenced, 4 lease expired)")
    for what, n in sorted(figures["member_errors"].items(), key=lambda x: -x[1]):
        print(f"  {n} x {what}")
    if "longest_leaderless" in figures:
        ll = figures["longest_leaderless"]
        print(f"  longest leaderless: {figures['longest_leaderless_s']:.1f}s in {ll['role']} "
              f"({ll['from_s']}s to {ll['to_s']}s); faults before it: {ll['faults_around']}")
    print(f"  run directory: {run_dir}")
    passed = sum(c.passed for c in checks)
    failed = len(checks) - passed
    print(f"faults: seed {cfg.seed}, {cfg.duration:.0f}s of faults, {duration_s:.0f}s in all, "
          f"faults injected: {kinds}{'; skipped: ' + skipped if skipped else ''}")
    print(f"faults: {figures['elections']} elections, {figures['records']} committed guarded records checked, "
          f"{figures['violations']} violations, longest leaderless {figures['longest_leaderless_s']:.1f}s; "
          f"{'PASSED' if failed == 0 else 'FAILED'}")
    print(f"{passed} passed, {failed} failed", flush=True)
    with open(os.path.join(run_dir, "report.json"), "w") as f:
        json.dump({"seed": cfg.seed, "duration_s": cfg.duration, "wall_s": round(duration_s, 1),
                   "started": started, "machine": machine(), "commit": commit(cfg.repo), "bootstrap": cfg.bootstrap,
                   "lease_ms": cfg.lease_ms, "renew_ms": cfg.renew_ms, "stagger_ms": cfg.stagger_ms,
                   "members": cfg.fleet_members, "timing": cfg.timing, "roles": roles, "figures": figures,
                   "checks": [{"name": c.name, "passed": c.passed, "problems": c.problems, "info": c.info}
                              for c in checks]}, f, indent=2)
    return failed == 0


def start_slow_network(cfg, isolation, fleet, role, routes, run_dir):
    """Starts the delaying proxies (slownet.py) and puts the slow role's
    members behind them: real packet loss with iptables' statistic match
    when the kernel has it, else the proxies hold a chunk now and then."""
    real_loss = cfg.slow_loss > 0 and isolation.statistic_works()
    hold = cfg.slow_loss if cfg.slow_loss > 0 and not real_loss else 0.0
    argv = [sys.executable, "-u", os.path.join(os.path.dirname(os.path.abspath(__file__)), "slownet.py"),
            "--delay-ms", str(cfg.slow_delay_ms), "--jitter-ms", str(cfg.slow_jitter_ms),
            "--hold-prob", str(hold), "--seed", str(cfg.seed), "--stats", os.path.join(run_dir, "slownet.json")]
    for broker, proxy in sorted(routes.items()):
        argv += ["--route", f"{proxy}:{broker}"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=open(os.path.join(run_dir, "slownet.stderr"), "ab"),
                            text=True)
    if proc.stdout.readline().strip() != "READY":
        proc.kill()
        raise RuntimeError("the slow network's proxies did not start (see slownet.stderr)")
    uids = [s.uid for s in fleet.slots if s.role == role]
    if None in uids or not isolation.slow(uids, routes, cfg.slow_loss if real_loss else 0.0):
        proc.terminate()
        raise RuntimeError("the slow network's iptables rules could not be inserted")
    how = (f"{cfg.slow_loss:.1%} of the packets dropped each way (iptables statistic)" if real_loss else
           f"{hold:.1%} of the chunks held 200-300 ms (no iptables statistic match here)" if hold else "no loss")
    log(f"slow network for {role}: proxies {sorted(routes.values())} delay each chunk "
        f"{cfg.slow_delay_ms:g} +/- {cfg.slow_jitter_ms:g} ms; {how}")
    return proc, {"delay_ms": cfg.slow_delay_ms, "jitter_ms": cfg.slow_jitter_ms, "loss": how}


def stop_slow_network(proxy, isolation, cfg, run_dir):
    """Takes the slow network down; its counters."""
    net = dict(getattr(cfg, "slow_network", {}))
    net["packets_dropped"] = isolation.slow_drops()
    isolation.mend_slow()
    if proxy is not None:
        proxy.terminate()
        proxy.wait()
    try:
        with open(os.path.join(run_dir, "slownet.json")) as fh:
            net["proxies"] = json.load(fh)
    except (OSError, ValueError):
        pass
    return net


def prune_runs(runs_dir, keep=10):
    """Keeps the newest `keep` run directories (their names sort by time)."""
    names = sorted(n for n in os.listdir(runs_dir) if os.path.isdir(os.path.join(runs_dir, n)))
    for n in names[:-keep]:
        shutil.rmtree(os.path.join(runs_dir, n), ignore_errors=True)


def main(argv):
    cfg = parse_args(argv)
    started = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    t_start = time.monotonic()
    run_id = f"{datetime.now(timezone.utc):%Y%m%d-%H%M%S}-seed{cfg.seed}"
    run_dir = os.path.join(cfg.work_dir, "runs", run_id)
    os.makedirs(run_dir, exist_ok=True)
    prune_runs(os.path.dirname(run_dir))
    for d in (cfg.work_dir, os.path.join(cfg.work_dir, "runs"), run_dir):
        os.chmod(d, 0o755)
    log(f"commit {commit(cfg.repo)}; seed {cfg.seed}; {cfg.duration:.0f}s of faults on {cfg.bootstrap}; "
        f"lease {cfg.lease_ms} ms, renew {cfg.renew_ms} ms (steady role: {cfg.steady_members} members, lease "
        f"{cfg.steady_lease_ms} ms, renew {cfg.steady_renew_ms} ms); run directory {run_dir}")
    log(f"reproduce the fault schedule with: ci/faults.sh --seed {cfg.seed} --duration {cfg.duration:g}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    cfg.partitions = kafka_io.ensure_state_topic(cfg.bootstrap)
    ports = [int(b.rsplit(":", 1)[1]) for b in cfg.bootstrap.split(",")]
    isolation = Isolation(ports, log)
    if not isolation.available:
        log(f"NOTICE: members cannot be cut off from the brokers: {isolation.why_not}; "
            "every member_cut fault is skipped and counted as skipped")
    if cfg.slow_members:
        why_not = isolation.slow_why_not()
        if why_not:
            log(f"NOTICE: no slow role: members cannot be put behind a slow network: {why_not}")
            cfg.slow_members = 0
    faulty = len(cfg.members_per_role)
    roles = pick_roles(f"faults-{secrets.token_hex(3)}",
                       faulty + (cfg.steady_members > 0) + (cfg.slow_members > 0) + (cfg.pipe_members > 0),
                       cfg.partitions)
    # After the faulty roles, in this order: the steady role (on a state
    # partition of its own) follows the lease-sizing rule and its members
    # take no fault of their own; the slow role too, behind the slow
    # network, with hand-overs; the pipeline role takes the member faults as
    # the faulty roles do.
    rest = roles[faulty:]
    steady = rest[:1] if cfg.steady_members else []
    rest = rest[len(steady):]
    slow = rest[:1] if cfg.slow_members else []
    rest = rest[len(slow):]
    pipe = rest[:1] if cfg.pipe_members else []
    cfg.rejoin_roles = slow
    cfg.fleet_members = (cfg.members_per_role + ([cfg.steady_members] if steady else [])
                         + ([cfg.slow_members] if slow else []) + ([cfg.pipe_members] if pipe else []))
    cfg.timing = {r: (cfg.lease_ms, cfg.renew_ms) for r in roles}
    for r in steady:
        cfg.timing[r] = (cfg.steady_lease_ms, cfg.steady_renew_ms)
    for r in slow:
        cfg.timing[r] = (cfg.slow_lease_ms, cfg.slow_renew_ms)
    topics = {r: f"{r}-data" for r in roles}
    # The pipeline's input topic and consumer group (its output is its data
    # topic).
    cfg.pipes = {r: (f"{r}-in", f"{r}-group") for r in pipe}
    for t in list(topics.values()) + [i for i, _ in cfg.pipes.values()]:
        kafka_io.create_topic(cfg.bootstrap, t, 1, {"min.insync.replicas": "2"})
    log("roles " + ", ".join(f"{r} (state partition {role_partition(r, cfg.partitions)})" for r in roles))
    # A neighbour's frozen transaction goes beside the first role (whose
    # partition the second shares: failovers there must not wait for it)
    # or the steady role (whose leader must not be deposed by it); the
    # steady role's data topic is the one made unwritable (its leader must
    # keep the lease).
    cfg.freeze_roles = [roles[0]] + steady
    cfg.unwritable_topics = [topics[r] for r in steady] or [topics[r] for r in roles[:faulty]]

    brokers = Brokers(cfg.repo, cfg.bootstrap, log)
    if not brokers.controllable:
        log(f"NOTICE: no broker faults: {brokers.why_not}")
    routes = {p: p + slownet.PROXY_OFFSET for p in ports}
    warn_ephemeral(ports + (list(routes.values()) if slow else []))
    fleet = Fleet(cfg, roles, topics, isolation, run_dir, cfg.seed, log)
    nemesis = Nemesis(cfg, roles[:faulty] + pipe, fleet, brokers, isolation, cfg.seed, run_dir, log)
    feeders = {r: kafka_io.Feeder(cfg.bootstrap, cfg.pipes[r][0], cfg.pipe_feed_every_s) for r in pipe}
    handovers = Handovers(fleet, slow[0], cfg.handover_every, lambda: nemesis.broker_busy, run_dir, log) \
        if slow else None
    lease_s = cfg.lease_ms / 1000.0
    stopped = False
    proxy = None
    try:
        if slow:
            proxy, cfg.slow_network = start_slow_network(cfg, isolation, fleet, slow[0], routes, run_dir)
        fleet.start()
        for f in feeders.values():
            f.start()
        if not wait_for(lambda: all(fleet.leader(r) for r in roles), within=120):
            log("FAILED: not every role had a leader 120 s after the members started; no faults injected")
        else:
            log(f"{fleet.now():.1f}s every role has a leader; the nemesis starts")
            until = fleet.now() + cfg.duration
            if handovers:
                handovers.start(until)
            nemesis.run(until=until)
        log(f"{fleet.now():.1f}s the nemesis stops; healing what is still faulty")
        if handovers:
            handovers.stop()
        nemesis.finish()
        isolation.heal(keep_slow=True)
        if brokers.controllable and not brokers.heal():
            log("a broker did not come back while healing")
        fleet.heal()
        cluster_whole = not brokers.controllable or len(brokers.pids()) == 3
        heal_t = fleet.now()
        settle = max(60.0, 10 * lease_s)
        wait_for(lambda: all(fleet.has_leader_since(r, heal_t) for r in roles), within=settle)
        healed = {r: fleet.has_leader_since(r, heal_t) for r in roles}
        fed = {r: f.stop() for r, f in feeders.items()}
        for r, n in fed.items():
            log(f"{fleet.now():.1f}s {n} inputs fed to {cfg.pipes[r][0]}; waiting for the pipeline to catch up")
            wait_for(lambda: kafka_io.committed_offset(cfg.bootstrap, cfg.pipes[r][1], cfg.pipes[r][0], 0) == n,
                     within=settle, step=1.0)
        time.sleep(5.0)
        log(f"{fleet.now():.1f}s healed at {heal_t:.1f}s; leaders since: {healed}; stopping the members")
        stop_t = fleet.now()
        fleet.stop()
        stopped = True
        net = stop_slow_network(proxy, isolation, cfg, run_dir) if slow else {}
        data, leases = read_logs(cfg, roles, topics, cfg.partitions, lease_s)
        pipes = {}
        for r, (source, group) in cfg.pipes.items():
            inputs, _ = kafka_io.read_committed(cfg.bootstrap, source, 0)
            pipes[r] = {"inputs": [o for o, _, _ in inputs], "fed": fed.get(r, 0),
                        "feeder_failed": feeders[r].failed,
                        "committed": kafka_io.committed_offset(cfg.bootstrap, group, source, 0)}
        batch_headers = read_headers(cfg, brokers, topics)
        run = {"roles": roles, "lease_ms": cfg.lease_ms, "stop_t": stop_t, "steady": steady, "slow": slow,
               "timing": cfg.timing, "members": dict(zip(roles, cfg.fleet_members)),
               "stagger_ms": cfg.stagger_ms, "partitions": cfg.partitions,
               "handovers_expected": bool(handovers and handovers.expected), "pipes": pipes}
        checks, figures = checker.analyse(run, fleet.events, nemesis.faults, data, leases, healed, batch_headers,
                                          handovers.asked if handovers else ())
        if slow:
            figures["slow_network"] = net
            figures["slow_network"]["handovers_skipped"] = handovers.skipped
            figures["slow_network"]["handovers_skipped_for_broker_faults"] = handovers.busy
        checks.append(checker.Check("the cluster has its three brokers after healing",
                                    [] if cluster_whole else [f"running nodes: {sorted(brokers.pids())}"]))
        figures["exits"] = dict(sorted(fleet.exits.items()))
        ok = report(cfg, roles, checks, figures, started, time.monotonic() - t_start, run_dir)
        if ok and not cfg.keep_topics:
            kafka_io.delete_topics(cfg.bootstrap, list(topics.values()) + [i for i, _ in cfg.pipes.values()])
        return 0 if ok else 1
    finally:
        for f in feeders.values():
            f.stop_flag.set()
        nemesis.stop_flag.set()
        if handovers:
            handovers.stop_flag.set()
        if proxy is not None and proxy.poll() is None:
            proxy.terminate()
            proxy.wait()
        isolation.heal()
        if brokers.controllable:
            brokers.heal()
        if not stopped:
            fleet.heal()
            fleet.stop()
        isolation.remove_users()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
