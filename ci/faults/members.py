"""The member processes: one `member` binary per slot, their JSON event
lines, and a supervisor that restarts a member that exited (after a short
random delay, with the same member id or a new one).

Every line a member prints is stamped on arrival with this process's
monotonic clock (seconds since the campaign began): the members' own `t_ms`
follow their wall clocks, which the clock fault moves on purpose.
"""

import json
import os
import pwd
import random
import signal
import subprocess
import threading
import time

# core events after which a member no longer leads
TERM_ENDS = {"fenced", "lease_expired", "ended", "resigned", "exit", "process_exit"}


class Slot:
    """A place in a role that one member process fills at a time."""

    def __init__(self, index, role, topic, uid, clock_file, write_every_ms):
        self.index = index
        self.role = role
        self.topic = topic
        self.uid = uid
        self.clock_file = clock_file
        self.write_every_ms = write_every_ms
        self.gen = 0
        self.member = f"m{index}-g0"
        self.proc = None
        self.exited = False
        self.restart_at = None
        self.busy = None  # the fault applied to this slot right now
        self.token = None  # the token of the current term, while it leads
        self.last_renewal = None  # arrival time of the last elected/renewed of the term

    @property
    def alive(self):
        return self.proc is not None and not self.exited

    @property
    def leading(self):
        return self.alive and self.token is not None


class Fleet:
    def __init__(self, cfg, roles, topics, isolation, run_dir, seed, log):
        self.cfg = cfg
        self.log = log
        self.run_dir = run_dir
        self.t0 = time.monotonic()
        self.lock = threading.RLock()
        self.events = []
        self.events_file = open(os.path.join(run_dir, "events.jsonl"), "a", buffering=1)
        self.rng = random.Random(f"supervisor-{seed}")
        self.stopping = False
        self.exits = {}  # exit code -> count
        self.readers = []
        self.slots = []
        clock_dir = os.path.join(run_dir, "clock")
        os.makedirs(clock_dir, exist_ok=True)
        os.chmod(clock_dir, 0o755)
        index = 0
        setup_rng = random.Random(f"slots-{seed}")
        for role, count in zip(roles, getattr(cfg, "fleet_members", cfg.members_per_role)):
            for _ in range(count):
                clock_file = os.path.join(clock_dir, f"slot{index}")
                with open(clock_file, "w") as f:
                    f.write("0\n")
                os.chmod(clock_file, 0o644)
                uid = isolation.user_for(index)
                every = setup_rng.randint(20, 50)
                self.slots.append(Slot(index, role, topics[role], uid, clock_file, every))
                index += 1
        self.supervisor = threading.Thread(target=self._supervise, name="supervisor", daemon=True)

    def now(self):
        return time.monotonic() - self.t0

    # ------------------------------------------------------------ processes

    def _argv(self, slot):
        c = self.cfg
        lease_ms, renew_ms = getattr(c, "timing", {}).get(slot.role, (c.lease_ms, c.renew_ms))
        return [
            c.member_bin,
            "--bootstrap", c.bootstrap,
            "--role", slot.role,
            "--member", slot.member,
            "--partitions", str(c.partitions),
            "--lease-ms", str(lease_ms),
            "--renew-ms", str(renew_ms),
            "--stagger-ms", str(c.stagger_ms),
            "--data-topic", slot.topic,
            "--write-every-ms", str(slot.write_every_ms),
            "--exit-on-stdin-eof",
        ] + (["--rejoin"] if slot.role in getattr(c, "rejoin_roles", ()) else []) + self._pipe_args(slot)

    def _pipe_args(self, slot):
        """The pipeline role's members pipe its input topic to its data
        topic instead of writing numbered records there."""
        pipes = getattr(self.cfg, "pipes", {})
        if slot.role not in pipes:
            return []
        source, group = pipes[slot.role]
        return ["--pipe-from", source, "--pipe-to", slot.topic, "--pipe-group", group, "--pipe-batch", "20"]

    def spawn(self, slot):
        env = {k: v for k, v in os.environ.items() if not k.startswith("KRABKA_")}
        env["RUST_LOG"] = os.environ.get("KRABKA_FAULTS_RUST_LOG", "warn")
        env["LD_PRELOAD"] = self.cfg.clock_shim
        env["KRABKA_FAULTS_CLOCK_FILE"] = slot.clock_file
        stderr = open(os.path.join(self.run_dir, f"slot{slot.index}.stderr"), "ab")
        stderr.write(f"---- {slot.member} at {self.now():.3f}s\n".encode())
        stderr.flush()
        kwargs = {}
        if slot.uid is not None:
            kwargs = {"user": slot.uid, "group": pwd.getpwuid(slot.uid).pw_gid, "extra_groups": []}
        proc = subprocess.Popen(
            self._argv(slot),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
            start_new_session=True,
            **kwargs,
        )
        stderr.close()
        with self.lock:
            slot.proc = proc
            slot.exited = False
            slot.restart_at = None
            slot.token = None
            slot.last_renewal = None
            self._record(slot, proc.pid, {"event": "spawn", "member": slot.member, "role": slot.role})
        reader = threading.Thread(target=self._read, args=(slot, proc), name=f"read-{slot.index}", daemon=True)
        reader.start()
        self.readers.append(reader)

    def _record(self, slot, pid, line):
        e = {"t": round(self.now(), 4), "slot": slot.index, "pid": pid, "role": slot.role,
             "member": line.get("member", slot.member), "line": line}
        self.events.append(e)
        self.events_file.write(json.dumps(e) + "\n")
        return e

    def _read(self, slot, proc):
        for raw in proc.stdout:
            try:
                line = json.loads(raw)
            except ValueError:
                line = {"event": "unparsed", "text": raw.decode(errors="replace").strip()}
            with self.lock:
                self._record(slot, proc.pid, line)
                name = line.get("event")
                if name == "elected":
                    slot.token = (line["producer_id"], line["epoch"])
                    slot.last_renewal = self.now()
                elif name == "renewed" and slot.token is not None:
                    slot.last_renewal = self.now()
                elif name in TERM_ENDS:
                    slot.token = None
        code = proc.wait()
        with self.lock:
            self._record(slot, proc.pid, {"event": "process_exit", "code": code})
            self.exits[code] = self.exits.get(code, 0) + 1
            if slot.proc is proc:
                slot.exited = True
                slot.token = None

    def _supervise(self):
        while not self.stopping:
            with self.lock:
                for slot in self.slots:
                    if not slot.exited:
                        continue
                    if slot.restart_at is None:
                        slot.restart_at = self.now() + self.rng.uniform(0.2, 2.0)
                        if self.rng.random() < 0.5:
                            slot.gen += 1
                            slot.member = f"m{slot.index}-g{slot.gen}"
                    elif self.now() >= slot.restart_at and not self.stopping:
                        self.spawn(slot)
            time.sleep(0.05)

    def start(self):
        for slot in self.slots:
            self.spawn(slot)
        self.supervisor.start()

    # ------------------------------------------------------------ queries

    def leader(self, role):
        with self.lock:
            for slot in self.slots:
                if slot.role == role and slot.leading:
                    return slot
        return None

    def signal(self, slot, sig):
        with self.lock:
            proc = slot.proc
            if proc is None or slot.exited:
                return None
            try:
                os.kill(proc.pid, sig)
            except ProcessLookupError:
                return None
            return proc.pid

    def command(self, slot, line):
        """Writes a command line (`resign`) to the member's stdin; returns its
        pid, or None when it is not running."""
        with self.lock:
            proc = slot.proc
            if proc is None or slot.exited:
                return None
            try:
                proc.stdin.write(f"{line}\n".encode())
                proc.stdin.flush()
            except (BrokenPipeError, OSError):
                return None
            return proc.pid

    def has_leader_since(self, role, since):
        """True when a live member of `role` was elected or renewed after `since`."""
        with self.lock:
            return any(
                s.role == role and s.leading and s.last_renewal is not None and s.last_renewal >= since
                for s in self.slots
            )

    # ------------------------------------------------------------ the end

    def heal(self):
        """SIGCONT for every member (a pause in flight ends) and every clock back to 0."""
        with self.lock:
            for slot in self.slots:
                with open(slot.clock_file, "w") as f:
                    f.write("0\n")
                if slot.alive:
                    try:
                        os.kill(slot.proc.pid, signal.SIGCONT)
                    except ProcessLookupError:
                        pass

    def stop(self, grace=25.0):
        """SIGTERM to every member (a leader resigns, a standby deregisters),
        SIGKILL to what is left after `grace` seconds."""
        with self.lock:
            self.stopping = True
            procs = [s.proc for s in self.slots if s.alive]
        if self.supervisor.is_alive():
            self.supervisor.join()
        for p in procs:
            for sig in (signal.SIGCONT, signal.SIGTERM):
                try:
                    os.kill(p.pid, sig)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + grace
        for p in procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.log(f"member pid {p.pid} did not stop within {grace:.0f}s of SIGTERM; SIGKILL")
                p.kill()
                p.wait()
        for r in self.readers:
            r.join(10)
        self.events_file.close()
