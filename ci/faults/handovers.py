"""Hand-overs of the slow role: every few seconds its leader is asked to
resign (the `resign` command on the member's stdin; the members run with
`--rejoin`, so the one that resigned registers again and waits for a turn),
and the checker times each hand-over from the command to the successor's
`elected` line.

A hand-over is asked only while no broker fault is in flight (nor within
the nemesis's settle time after one): the property is that hand-overs
complete under the slow network, not under a broker fault as well. The
schedule is fixed (every `every` seconds), apart from the nemesis's random
draws, so adding the slow role leaves a seed's fault schedule as it was.
"""

import json
import os
import threading


class Handovers:
    def __init__(self, fleet, role, every, broker_busy, run_dir, log):
        self.fleet = fleet
        self.role = role
        self.every = every
        self.broker_busy = broker_busy
        self.log = log
        self.asked = []  # {"t", "slot", "member", "pid", "token"}
        self.skipped = 0
        self.busy = 0  # of the skipped: a broker fault was in flight
        self.tries = 0
        self.stop_flag = threading.Event()
        self.file = open(os.path.join(run_dir, "handovers.jsonl"), "a", buffering=1)
        self.thread = None

    def start(self, until):
        self.thread = threading.Thread(target=self._run, args=(until,), name="handovers", daemon=True)
        self.thread.start()

    def _run(self, until):
        while not self.stop_flag.wait(self.every) and self.fleet.now() + 1.0 < until:
            self.tries += 1
            if self.broker_busy():
                self.skipped += 1
                self.busy += 1
                continue
            slot = self.fleet.leader(self.role)
            if slot is None:
                self.skipped += 1
                continue
            token = slot.token
            pid = self.fleet.command(slot, "resign")
            if pid is None:
                self.skipped += 1
                continue
            h = {"t": round(self.fleet.now(), 4), "slot": slot.index, "member": slot.member, "pid": pid,
                 "token": list(token) if token else None}
            self.asked.append(h)
            self.file.write(json.dumps(h) + "\n")
            self.log(f"{h['t']:7.1f}s hand-over   {self.role}: slot{slot.index} {slot.member} asked to resign")

    @property
    def expected(self):
        """Whether a hand-over was due: some turn came while no broker
        fault was in flight (a rolling upgrade can hold every turn)."""
        return self.tries > self.busy

    def stop(self):
        self.stop_flag.set()
        if self.thread is not None:
            self.thread.join()
        self.file.close()
