"""The nemesis: faults at random, reproducibly from the seed.

Each step draws the same random values whatever happens at run time (the
kind, the role, leader or standby, a pick among the candidates, a duration,
a broker node, a clock offset), so one seed always gives the same schedule of
decisions; what the cluster and the members do under it depends on timing.

Kinds:
  member_kill   SIGKILL of a member (the supervisor restarts it)
  member_pause  SIGSTOP, then SIGCONT after 0.3 to 2.5 leases
  member_cut    iptables drops the member's packets to the brokers for 0.5 to 3 leases
  member_clock  the member's wall clock steps 2 to 30 s forward or back, for 5 to 20 s
  broker_kill   SIGKILL of a broker JVM, restarted (ci/kafka.sh node start) 2 to 10 s later
  broker_pause  SIGSTOP of a broker JVM, SIGCONT 2 to 12 s later
  broker_pause_long  SIGSTOP of a broker JVM past the brokers' session (9 s on
                Kafka's defaults), SIGCONT 12 to 20 s later
  rolling_restart  the three brokers restarted one at a time, as an upgrade
                does: each stopped with SIGTERM (a controlled shutdown),
                started again, and every partition back in sync (or 60 s)
                before the next
  rolling_upgrade  (opt-in, once per run: the upgrade campaign, ci/faults.sh
                --upgrade) the three brokers, formatted by an older Kafka,
                restarted one at a time on a newer one (ci/kafka.sh node
                upgrade: SIGTERM, the newer jars on the same data), every
                partition back in sync before the next; then the feature
                levels finalized as Kafka's upgrade notes ask: metadata.version
                first, then the release's other features but kraft.version
                (KAFKA-21426: raising it turns a static quorum dynamic)
  broker_isolate  a broker cut off from its peers (iptables on its
                inter-broker and controller ports, and on its JVM's packets
                to theirs) while clients still reach it, for 12 to 40 s:
                past the session, so the controller fences it and its
                partitions and coordinators move, while it still answers
                clients with what it last knew; past 30 s (the brokers'
                request.timeout.ms) now and then, so a coordinator's markers
                sent to it time out and go to the partition's new leader
  topic_unwritable  a broker killed and, once Kafka has shrunk the ISR of
                the steady role's data topic (the broker session, 9 s), the
                topic's min.insync.replicas set to 3 (its replication
                factor): it takes no write for 15 to 25 s; then
                min.insync.replicas 2 again and the broker restarted. (A
                write in flight when a broker of a topic whose
                min.insync.replicas equals its replication factor dies is
                another matter: docs/operations.md.)
  neighbour_freeze  a transactional producer of a neighbour role (a
                transaction timeout of 120 s) writes one record to the state
                partition of a campaign role and is SIGKILLed before its
                EndTxn: the partition's last stable offset stays behind it
                until the nemesis aborts it 20 to 40 s later (an
                InitProducerId of the neighbour's id, as its restarted
                member's would), or at the end
At most one broker fault at a time (topic_unwritable is one) and one freeze;
a member under a fault takes no other. Member faults reach the roles given
(not the steady role); broker faults, unwritable topics and freezes reach
every role.
"""

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

import kafka_io
from roles import role_partition

KINDS = [
    ("member_kill", 3),
    ("member_pause", 3),
    ("member_cut", 2),
    ("member_clock", 2),
    ("broker_kill", 1),
    ("broker_pause", 1),
    ("broker_pause_long", 1),
    ("rolling_restart", 1),
    ("broker_isolate", 1),
    # Opt-in too: raising min.insync.replicas at run time races the writes
    # in flight (one that reaches the partition as it turns unwritable holds
    # the role's transactions until it is writable again: docs/faults.md).
    ("topic_unwritable", 0),
    ("neighbour_freeze", 1),
    # Opt-in: it needs a cluster of an older Kafka and the newer one's jars
    # (ci/faults.sh --upgrade), and it runs once.
    ("rolling_upgrade", 0),
]
# the transaction timeout of a frozen neighbour: longer than any lease of
# the campaign, so only the nemesis's abort ends the freeze in a run
FREEZE_TIMEOUT_MS = 120000
# seconds a rolling restart waits for every partition to be back in sync
# before it restarts the next broker
RESYNC_WITHIN = 60.0
# seconds a broker fault keeps the broker slot after it healed (replicas catch up)
BROKER_SETTLE = 8.0


class Nemesis:
    def __init__(self, cfg, roles, fleet, brokers, isolation, seed, run_dir, log):
        self.cfg = cfg
        self.roles = roles
        self.fleet = fleet
        self.brokers = brokers
        self.isolation = isolation
        self.rng = random.Random(f"nemesis-{seed}")
        self.log = log
        self.faults = []
        self.lock = threading.Lock()
        self.threads = []
        self.broker_busy = False
        self.freezing = False
        self.freezes = 0
        self.upgraded = False
        self.stop_flag = threading.Event()
        self.file = open(os.path.join(run_dir, "faults.jsonl"), "a", buffering=1)

    def _note(self, fault):
        with self.lock:
            self.faults.append(fault)
            self.file.write(json.dumps(fault) + "\n")
        what = fault["status"] if fault["status"] != "injected" else ""
        self.log(f"{fault['t']:7.1f}s {fault['kind']:<13} {fault.get('target', '')} "
                 f"{fault.get('detail', '')} {what} {fault.get('reason', '')}".rstrip())

    def _later(self, fn, *args):
        t = threading.Thread(target=fn, args=args, daemon=True)
        t.start()
        self.threads.append(t)

    def run(self, until):
        """Injects faults until the fleet's clock reaches `until`."""
        only = getattr(self.cfg, "kinds", None)
        kinds = [k for k, _ in KINDS if only is None or k in only]
        # A kind of weight 0 runs only when --kinds names it (weight 1 then).
        weights = [w if only is None else max(w, 1) for k, w in KINDS if only is None or k in only]
        lease = self.cfg.lease_ms / 1000.0
        while True:
            gap = self.rng.uniform(self.cfg.gap_min, self.cfg.gap_max)
            draw = {
                "kind": self.rng.choices(kinds, weights)[0],
                "role": self.rng.randrange(len(self.roles)),
                "leader": self.rng.random() < 0.6,
                "pick": self.rng.random(),
                "factor": self.rng.random(),
                "node": self.rng.randint(1, 3),
                "sign": self.rng.choice((-1, 1)),
            }
            if self.stop_flag.wait(gap) or self.fleet.now() + 0.5 >= until:
                return
            kind = draw["kind"]
            if kind.startswith("member_"):
                self._member_fault(kind, draw, lease)
            elif kind == "neighbour_freeze":
                self._freeze(draw)
            else:
                self._broker_fault(kind, draw)

    def finish(self):
        """Stops injecting and waits until every fault in flight has healed."""
        self.stop_flag.set()
        for t in self.threads:
            t.join()
        self.file.close()

    # ------------------------------------------------------------ members

    def _target(self, role, prefer_leader, pick):
        with self.fleet.lock:
            free = [s for s in self.fleet.slots if s.role == role and s.alive and s.busy is None]
            if not free:
                return None, False
            leader = next((s for s in free if s.leading), None)
            if prefer_leader and leader is not None:
                return leader, True
            slot = free[min(int(pick * len(free)), len(free) - 1)]
            return slot, slot.leading

    def _member_fault(self, kind, d, lease):
        role = self.roles[d["role"]]
        f = {"t": round(self.fleet.now(), 3), "kind": kind, "role": role}
        slot, leading = self._target(role, d["leader"], d["pick"])
        if slot is None:
            f.update(status="skipped", reason="no live member free of faults in the role")
            return self._note(f)
        f["target"] = f"slot{slot.index} {slot.member}{' (leader)' if leading else ''}"
        f["leader"] = leading
        if kind == "member_kill":
            pid = self.fleet.signal(slot, signal.SIGKILL)
            f.update(status="injected" if pid else "skipped", pid=pid)
            if not pid:
                f["reason"] = "the member exited first"
            return self._note(f)
        if kind == "member_cut" and (not self.isolation.available or slot.uid is None):
            f.update(status="skipped", reason=f"cannot cut a member off: {self.isolation.why_not}")
            return self._note(f)
        slot.busy = kind
        if kind == "member_pause":
            secs = lease * (0.3 + 2.2 * d["factor"])
            pid = self.fleet.signal(slot, signal.SIGSTOP)
            f.update(detail=f"for {secs:.1f}s", seconds=round(secs, 2), pid=pid)
            if not pid:
                slot.busy = None
                f.update(status="skipped", reason="the member exited first")
                return self._note(f)
            f["status"] = "injected"
            self._note(f)
            self._later(self._resume_member, slot, pid, secs)
        elif kind == "member_cut":
            secs = lease * (0.5 + 2.5 * d["factor"])
            f.update(detail=f"for {secs:.1f}s", seconds=round(secs, 2), uid=slot.uid)
            if not self.isolation.cut(slot.uid):
                slot.busy = None
                f.update(status="skipped", reason="the iptables rule could not be inserted")
                return self._note(f)
            f["status"] = "injected"
            self._note(f)
            self._later(self._mend_member, slot, secs)
        else:  # member_clock
            offset_ms = int(d["sign"] * (2000 + 28000 * d["factor"]))
            secs = 5.0 + 15.0 * d["pick"]
            f.update(detail=f"{offset_ms:+d} ms for {secs:.1f}s", offset_ms=offset_ms, seconds=round(secs, 2))
            with open(slot.clock_file, "w") as fh:
                fh.write(f"{offset_ms}\n")
            f["status"] = "injected"
            self._note(f)
            self._later(self._reset_clock, slot, secs)

    def _resume_member(self, slot, pid, secs):
        time.sleep(secs)
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
        slot.busy = None

    def _mend_member(self, slot, secs):
        time.sleep(secs)
        self.isolation.mend(slot.uid)
        slot.busy = None

    def _reset_clock(self, slot, secs):
        time.sleep(secs)
        with open(slot.clock_file, "w") as fh:
            fh.write("0\n")
        slot.busy = None

    # ------------------------------------------------------------ brokers

    def _broker_fault(self, kind, d):
        node = d["node"]
        f = {"t": round(self.fleet.now(), 3), "kind": kind, "target": f"broker node {node}"}
        if not self.brokers.controllable:
            f.update(status="skipped", reason=self.brokers.why_not)
            return self._note(f)
        with self.lock:
            busy = self.broker_busy
            self.broker_busy = True
        if busy:
            f.update(status="skipped", reason="a broker fault is in flight")
            return self._note(f)
        if kind == "rolling_restart":
            f.update(target="brokers 1, 2, 3", detail="one at a time")
            f["status"] = "injected"
            self._note(f)
            self._later(self._rolling_restart, f)
            return
        if kind == "rolling_upgrade":
            to = getattr(self.cfg, "upgrade_to", None)
            if self.upgraded or not to:
                self.broker_busy = False
                f.update(status="skipped", reason="the cluster was upgraded already" if self.upgraded else
                         "no --upgrade-to version")
                return self._note(f)
            self.upgraded = True
            f.update(target="brokers 1, 2, 3", detail=f"one at a time to Kafka {to}, then the features finalized",
                     to=to)
            f["status"] = "injected"
            self._note(f)
            self._later(self._rolling_upgrade, f, to)
            return
        if kind == "broker_isolate":
            why_not = self.isolation.broker_cut_why_not()
            pid = self.brokers.pids().get(node)
            if why_not or pid is None:
                self.broker_busy = False
                f.update(status="skipped", reason=why_not or "the node is not running")
                return self._note(f)
            ports = sorted(int(b.rsplit(":", 1)[1]) for b in self.cfg.bootstrap.split(","))
            inter = lambda p: [p + 50, p + 100]  # noqa: E731 - ci/kafka.sh's inter-broker and controller ports
            own = inter(ports[node - 1])
            peers = [q for i, p in enumerate(ports) if i != node - 1 for q in inter(p)]
            secs = 12.0 + 28.0 * d["factor"]
            f.update(detail=f"cut off from its peers for {secs:.1f}s (clients still reach it)",
                     seconds=round(secs, 2), pid=pid)
            if not self.isolation.cut_broker(node, pid, own, peers):
                self.broker_busy = False
                f.update(status="skipped", reason="the iptables rules could not be inserted")
                return self._note(f)
            f["status"] = "injected"
            self._note(f)
            self._later(self._mend_broker, node, secs)
            return
        if kind == "topic_unwritable":
            topics = getattr(self.cfg, "unwritable_topics", [])
            if not topics:
                self.broker_busy = False
                f.update(status="skipped", reason="no data topic to make unwritable")
                return self._note(f)
            topic = topics[min(int(d["pick"] * len(topics)), len(topics) - 1)]
            secs = 15.0 + 10.0 * d["factor"]
            pid = self.brokers.kill(node)
            if pid is None:
                self.broker_busy = False
                f.update(status="skipped", reason="the node is not running")
                return self._note(f)
            f.update(target=f"{topic} (broker node {node} down)", topic=topic,
                     detail=f"min.insync.replicas 3 for {secs:.1f}s", seconds=round(secs, 2), pid=pid)
            shrunk = _wait(lambda: node not in (kafka_io.in_sync(self.cfg.bootstrap, topic, 0) or [node]), 40.0)
            # The writes that waited for the dead replica end as the ISR
            # shrinks; one still in flight when the topic turns unwritable
            # would hold the role's transactions.
            time.sleep(3.0)
            try:
                if not shrunk:
                    raise RuntimeError(f"broker node {node} still in the ISR after 40 s")
                kafka_io.set_topic_config(self.cfg.bootstrap, topic, "min.insync.replicas", "3")
            except Exception as e:  # noqa: BLE001 - reported as a skipped fault
                f.update(status="skipped", reason=f"the topic was not made unwritable: {e}")
                self._note(f)
                self._later(self._restart_broker, node, 0.0)
                return
            f["t"] = round(self.fleet.now(), 3)
            f["status"] = "injected"
            self._note(f)
            self._later(self._mend_topic, topic, node, secs)
            return
        if kind == "broker_kill":
            secs = 2.0 + 8.0 * d["factor"]
            pid = self.brokers.kill(node)
            f.update(detail=f"down {secs:.1f}s, then restarted", seconds=round(secs, 2), pid=pid)
            if pid is None:
                self.broker_busy = False
                f.update(status="skipped", reason="the node is not running")
                return self._note(f)
            f["status"] = "injected"
            self._note(f)
            self._later(self._restart_broker, node, secs)
        else:
            if kind == "broker_pause_long":
                secs = 12.0 + 8.0 * d["factor"]
            else:
                secs = 2.0 + 10.0 * d["factor"]
            pid = self.brokers.pause(node)
            f.update(detail=f"paused {secs:.1f}s", seconds=round(secs, 2), pid=pid)
            if pid is None:
                self.broker_busy = False
                f.update(status="skipped", reason="the node is not running")
                return self._note(f)
            f["status"] = "injected"
            self._note(f)
            self._later(self._resume_broker, pid, secs)

    def _restart_broker(self, node, secs):
        time.sleep(secs)
        t = self.fleet.now()
        ok = self.brokers.start(node)
        self.log(f"{self.fleet.now():7.1f}s broker node {node} "
                 f"{'is back' if ok else 'did NOT come back'} ({self.fleet.now() - t:.1f}s to restart)")
        self.stop_flag.wait(BROKER_SETTLE)
        self.broker_busy = False

    def _rolling_upgrade(self, f, to):
        f["steps"] = []
        for node in (1, 2, 3):
            t = self.fleet.now()
            ok = self.brokers.upgrade(node, to)
            back = self.fleet.now()
            synced = _wait(lambda: kafka_io.under_replicated(self.cfg.bootstrap) == 0, RESYNC_WITHIN)
            f["steps"].append({"node": node, "t": round(t, 3), "back_t": round(back, 3), "ok": ok,
                               "synced_t": round(self.fleet.now(), 3), "synced": synced})
            self.log(f"{self.fleet.now():7.1f}s rolling upgrade: broker node {node} "
                     f"{'runs Kafka ' + to if ok else 'did NOT come back on Kafka ' + to} after "
                     f"{back - t:.1f}s, {'every partition in sync' if synced else 'partitions still under-replicated'} "
                     f"({self.fleet.now() - t:.1f}s)")
            if not ok:
                break
        if all(s["ok"] for s in f["steps"]) and len(f["steps"]) == 3:
            self._finalize(f, to)
        f["done_t"] = round(self.fleet.now(), 3)
        f["seconds"] = round(f["done_t"] - f["t"], 3)
        self.stop_flag.wait(BROKER_SETTLE)
        self.broker_busy = False

    def _finalize(self, f, to):
        """Raises the feature levels to the release's, as Kafka's upgrade
        notes ask once every broker runs it: metadata.version first (a
        broker registered under the old metadata.version does not yet
        announce the newer features), then the others, never kraft.version."""
        release = ".".join(to.split(".")[:2])
        ok, out = self.brokers.features(["version-mapping", "--release-version", release], version=to)
        levels = dict(ln.split("=", 1) for ln in out.splitlines() if "=" in ln and " " not in ln.split("=", 1)[0])
        levels = {k: v.split()[0] for k, v in levels.items()}
        f["feature_levels"] = levels
        steps = [["metadata.version"], [k for k in levels if k not in ("metadata.version", "kraft.version")]]
        for names in steps:
            args = ["upgrade"] + [a for k in names if k in levels for a in ("--feature", f"{k}={levels[k]}")]
            if len(args) == 1:
                continue
            done = False
            for _ in range(10):
                done, out = self.brokers.features(args, version=to)
                if done:
                    break
                time.sleep(3.0)
            self.log(f"{self.fleet.now():7.1f}s rolling upgrade: features {' '.join(args[1:])}: "
                     f"{'finalized' if done else 'NOT finalized: ' + out}")
            f.setdefault("finalize", []).append({"t": round(self.fleet.now(), 3), "features": names, "ok": done,
                                                  "out": out[-300:]})
            if not done:
                return
        ok, out = self.brokers.features(["describe"], version=to)
        f["finalized_t"] = round(self.fleet.now(), 3)
        f["described"] = [" ".join(ln.split()[:2] + ln.split()[6:8]) for ln in out.splitlines() if "Feature:" in ln]
        self.log(f"{self.fleet.now():7.1f}s rolling upgrade: the cluster's features: {f['described']}")

    def _rolling_restart(self, f=None):
        steps = f.setdefault("steps", []) if f is not None else []
        for node in (1, 2, 3):
            if self.stop_flag.is_set():
                break
            t = self.fleet.now()
            stopped = self.brokers.stop(node)
            started = self.brokers.start(node)
            steps.append({"node": node, "t": round(t, 3), "back_t": round(self.fleet.now(), 3), "ok": started})
            synced = _wait(lambda: kafka_io.under_replicated(self.cfg.bootstrap) == 0, RESYNC_WITHIN)
            self.log(f"{self.fleet.now():7.1f}s rolling restart: broker node {node} "
                     f"{'stopped' if stopped else 'did NOT stop'}, "
                     f"{'is back' if started else 'did NOT come back'}, "
                     f"{'every partition in sync' if synced else 'partitions still under-replicated'} "
                     f"({self.fleet.now() - t:.1f}s)")
        if f is not None:
            f["seconds"] = round(self.fleet.now() - f["t"], 3)
        self.stop_flag.wait(BROKER_SETTLE)
        self.broker_busy = False

    def _mend_broker(self, node, secs):
        self.stop_flag.wait(secs)
        self.isolation.mend_broker(node)
        synced = _wait(lambda: kafka_io.under_replicated(self.cfg.bootstrap) == 0, RESYNC_WITHIN)
        self.log(f"{self.fleet.now():7.1f}s broker node {node} reconnected to its peers; "
                 f"{'every partition in sync' if synced else 'partitions still under-replicated'}")
        self.stop_flag.wait(BROKER_SETTLE)
        self.broker_busy = False

    def _mend_topic(self, topic, node, secs):
        self.stop_flag.wait(secs)
        try:
            kafka_io.set_topic_config(self.cfg.bootstrap, topic, "min.insync.replicas", "2")
            restored = True
        except Exception as e:  # noqa: BLE001 - logged; the run goes on
            restored = False
            self.log(f"{self.fleet.now():7.1f}s {topic}: min.insync.replicas NOT restored: {e}")
        ok = self.brokers.start(node)
        synced = _wait(lambda: kafka_io.under_replicated(self.cfg.bootstrap) == 0, RESYNC_WITHIN)
        self.log(f"{self.fleet.now():7.1f}s {topic} writable again (min.insync.replicas "
                 f"{'2' if restored else 'still 3'}); broker node {node} "
                 f"{'is back' if ok else 'did NOT come back'}, "
                 f"{'every partition in sync' if synced else 'partitions still under-replicated'}")
        self.stop_flag.wait(BROKER_SETTLE)
        self.broker_busy = False

    # ------------------------------------------------------------ freezes

    def _freeze(self, d):
        targets = getattr(self.cfg, "freeze_roles", [])
        f = {"t": round(self.fleet.now(), 3), "kind": "neighbour_freeze"}
        if not targets:
            f.update(status="skipped", reason="no role to freeze beside")
            return self._note(f)
        with self.lock:
            busy = self.freezing
            self.freezing = True
        if busy:
            f.update(status="skipped", reason="a freeze is in flight")
            return self._note(f)
        beside = targets[min(int(d["pick"] * len(targets)), len(targets) - 1)]
        partition = role_partition(beside, self.cfg.partitions)
        self.freezes += 1
        k = 0
        while True:
            tid = f"{beside}-frozen-{self.freezes}-{k}"
            if role_partition(tid, self.cfg.partitions) == partition:
                break
            k += 1
        secs = 20.0 + 20.0 * d["factor"]
        f.update(target=f"state partition {partition} (beside {beside})", tid=tid, partition=partition,
                 beside=beside, detail=f"for {secs:.1f}s", seconds=round(secs, 2))
        proc = subprocess.Popen([sys.executable, "-u", _FREEZE, "hold", self.cfg.bootstrap, tid, str(partition),
                                 str(FREEZE_TIMEOUT_MS)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                text=True)
        ready = _read_line(proc, "READY", 60.0)
        proc.kill()
        proc.wait()
        if not ready:
            self.freezing = False
            f.update(status="skipped", reason="the frozen producer did not write its record within 60 s")
            return self._note(f)
        f["t"] = round(self.fleet.now(), 3)
        f["status"] = "injected"
        self._note(f)
        self._later(self._thaw, f, tid, secs)

    def _thaw(self, f, tid, secs):
        self.stop_flag.wait(secs)
        t = self.fleet.now()
        try:
            r = subprocess.run([sys.executable, "-u", _FREEZE, "abort", self.cfg.bootstrap, tid],
                               capture_output=True, text=True, timeout=180)
            ok, why = r.returncode == 0, r.stderr.strip()[-200:]
        except subprocess.TimeoutExpired:
            # Kafka aborts it itself after its transaction timeout.
            ok, why = False, "the abort did not finish within 180 s"
        f["thawed_t"] = round(self.fleet.now(), 3)
        with self.lock:
            if not self.file.closed:
                self.file.write(json.dumps({"thaw_of": tid, "t": f["thawed_t"], "ok": ok}) + "\n")
        self.log(f"{self.fleet.now():7.1f}s neighbour {tid} aborted "
                 f"{'' if ok else 'NOT (' + why + ') '}"
                 f"({self.fleet.now() - t:.1f}s)")
        self.freezing = False

    def _resume_broker(self, pid, secs):
        time.sleep(secs)
        self.brokers.resume(pid)
        self.stop_flag.wait(BROKER_SETTLE)
        self.broker_busy = False


_FREEZE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "freeze.py")


def _read_line(proc, marker, within):
    """Whether `proc` printed a line starting with `marker` within
    `within` seconds."""
    found = threading.Event()

    def read():
        for line in proc.stdout:
            if line.startswith(marker):
                found.set()
                return

    threading.Thread(target=read, daemon=True).start()
    return found.wait(within)


def _wait(cond, within, step=0.5):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(step)
    return False
