"""The brokers of the 3-node cluster, through ci/kafka.sh: their pids, a
SIGKILL and a restart, a pause. Only a cluster that ci/kafka.sh runs (same
KAFKA_PORT_3 / KAFKA_STATE_DIR in the environment) can take broker faults.
"""

import os
import re
import signal
import subprocess
import threading
import time


class Brokers:
    def __init__(self, repo, bootstrap, log):
        self.repo = repo
        self.script = os.path.join(repo, "ci", "kafka.sh")
        self.bootstrap = bootstrap
        self.log = log
        self.lock = threading.Lock()
        self.paused = set()
        # node -> the Kafka version it runs, once a rolling upgrade moved it
        # (ci/kafka.sh starts a node only with its own version)
        self.versions = {}
        self.why_not = None
        try:
            mine = self._run(["bootstrap", "3"]).strip().splitlines()[-1]
        except (subprocess.CalledProcessError, IndexError) as e:
            mine = f"(ci/kafka.sh bootstrap 3 failed: {e})"
        if sorted(mine.split(",")) != sorted(bootstrap.split(",")):
            self.why_not = (
                f"the cluster {bootstrap} is not the one ci/kafka.sh runs with this environment "
                f"({mine}); set KAFKA_PORT_3 / KAFKA_STATE_DIR to match"
            )
        elif len(self.pids()) != 3:
            self.why_not = f"ci/kafka.sh status 3 does not show three running nodes: {self.pids()}"

    @property
    def controllable(self):
        return self.why_not is None

    def _run(self, args, timeout=60, version=None):
        env = dict(os.environ, KAFKA_VERSION=version) if version else None
        return subprocess.run(
            ["bash", self.script, *args],
            cwd=self.repo,
            check=True,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        ).stdout

    def pids(self):
        """{node: pid} of the running nodes (`ci/kafka.sh status 3`)."""
        out = subprocess.run(
            ["bash", self.script, "status", "3"], cwd=self.repo, capture_output=True, text=True, timeout=60
        ).stdout
        found = {}
        for m in re.finditer(r"node (\d+): (?:running|starting) \(pid (\d+)", out):
            found[int(m.group(1))] = int(m.group(2))
        return found

    def kill(self, node):
        """SIGKILL of the node's JVM; returns the pid, or None if it was not running."""
        pid = self.pids().get(node)
        if pid is None:
            return None
        os.kill(pid, signal.SIGKILL)
        return pid

    def start(self, node, attempts=3, timeout=180):
        """`ci/kafka.sh node start 3 NODE`: starts it and waits until it is back
        in the metadata, up to `attempts` times. Returns True when it came back.

        A start can fail with "Address already in use" when the broker port
        lies in the kernel's ephemeral range: a client reconnecting to the dead
        broker may connect to itself (a TCP self-connect) and hold the port."""
        for attempt in range(1, attempts + 1):
            try:
                self._run(["node", "start", "3", str(node)], timeout=timeout, version=self.versions.get(node))
                return True
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
                stderr = getattr(e, "stderr", "") or ""
                why = "Address already in use" if "Address already in use" in stderr else stderr.strip()[-300:]
                self.log(f"restarting broker node {node} failed (attempt {attempt} of {attempts}): {why}")
                time.sleep(2.0)
        return False

    def stop(self, node, timeout=120):
        """`ci/kafka.sh node stop 3 NODE`: SIGTERM, a controlled shutdown that
        hands the node's partition leaders and coordinators over (as a rolling
        restart does). Returns True when it stopped."""
        try:
            self._run(["node", "stop", "3", str(node)], timeout=timeout)
            return True
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
            self.log(f"stopping broker node {node} failed: {(getattr(e, 'stderr', '') or '').strip()[-300:]}")
            return False

    def upgrade(self, node, version, timeout=240):
        """`ci/kafka.sh node upgrade 3 NODE` with KAFKA_VERSION=version: a
        controlled shutdown, then the node started with the newer version's
        jars on its data. Returns True when it came back."""
        try:
            self._run(["node", "upgrade", "3", str(node)], timeout=timeout, version=version)
            self.versions[node] = version
            return True
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
            self.log(f"upgrading broker node {node} to {version} failed: "
                     f"{(getattr(e, 'stderr', '') or '').strip()[-400:]}")
            return False

    def features(self, args, version=None, timeout=120):
        """`ci/kafka.sh tool features --bootstrap-server ... ARGS`: (ok, output)."""
        try:
            out = self._run(["tool", "features", "--bootstrap-server", self.bootstrap, *args], timeout=timeout,
                            version=version)
            return True, out
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
            return False, ((getattr(e, "stdout", "") or "") + (getattr(e, "stderr", "") or "")).strip()[-600:]

    def pause(self, node):
        pid = self.pids().get(node)
        if pid is None:
            return None
        with self.lock:
            os.kill(pid, signal.SIGSTOP)
            self.paused.add(pid)
        return pid

    def resume(self, pid):
        with self.lock:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            self.paused.discard(pid)

    def heal(self):
        """Resumes every paused broker and starts every node that is down."""
        with self.lock:
            for pid in list(self.paused):
                try:
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
            self.paused.clear()
        ok = True
        running = self.pids()
        for node in (1, 2, 3):
            if node not in running:
                self.log(f"heal: broker node {node} is down; starting it")
                ok = self.start(node) and ok
        return ok
