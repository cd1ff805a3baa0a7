"""Cutting one member off from the brokers: each member slot runs under a
uid of its own, and an iptables owner rule drops that uid's packets to the
broker ports on loopback. Every rule carries the comment below, so a clean-up
(this module's heal, or ci/faults.sh's trap) finds and deletes them all.

Cutting one broker off from its peers while clients still reach it: the
brokers replicate on a listener of their own (the client port + 50) and the
controllers talk on another (+ 100), so two rules cut the broker's
inter-broker traffic and leave its client port alone: one drops every packet
to its own inter-broker and controller ports (its peers' requests), the
other every packet of its JVM (moved into a cgroup v2 group of its own,
`-m cgroup --path`) to its peers' inter-broker and controller ports (its own
requests).

Putting some members behind a slow, lossy network (slownet.py): a `nat`
rule per member uid and broker redirects the member's connections to the
broker's client port to that broker's delaying proxy, and two `statistic`
rules drop packets at random between the members and the proxies.
"""

import os
import pwd
import shutil
import subprocess
import threading

COMMENT = "krabka-faults"
# the slow network's rules (slow): they stay in while the faults are healed,
# until the members stop
SLOW_COMMENT = "krabka-faults-slow"
# the cgroup v2 groups of cut-off brokers: krabka-faults-n<node>
CGROUP_PREFIX = "krabka-faults-n"


def cgroup2_root():
    """Where the cgroup v2 hierarchy is mounted, or None."""
    with open("/proc/mounts") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) > 2 and parts[2] == "cgroup2":
                return parts[1]
    return None
USER_PREFIX = "krabkaf"


def _iptables():
    return shutil.which("iptables") or "/usr/sbin/iptables"


class Isolation:
    """Users for the member slots and the iptables rules that cut them off.

    `available` is False (and `why_not` says why) when this process cannot
    create users or rules: then members run as the current user and the
    cut-off fault is skipped, loudly."""

    def __init__(self, ports, log):
        self.ports = sorted(ports)
        self.log = log
        self.lock = threading.Lock()
        self.active = {}  # uid -> rule arguments
        self.slow_rules = []  # the slow network's rules: (-t, table, chain, match...)
        self.created_users = []
        self.why_not = None
        if os.geteuid() != 0:
            self.why_not = "not running as root (users and iptables rules need root)"
        elif not os.path.exists(_iptables()):
            self.why_not = "iptables is not installed (ci/faults.sh installs it with apt-get when it can)"
        else:
            r = subprocess.run([_iptables(), "-w", "-S", "OUTPUT"], capture_output=True, text=True)
            if r.returncode != 0:
                self.why_not = f"iptables does not work here: {r.stderr.strip()}"
        if self.why_not is None:
            self.delete_stale_rules()

    @property
    def available(self):
        return self.why_not is None

    def user_for(self, slot_index):
        """The uid of member slot `slot_index`, created if missing (None when
        isolation is not available)."""
        if not self.available:
            return None
        name = f"{USER_PREFIX}{slot_index}"
        try:
            return pwd.getpwnam(name).pw_uid
        except KeyError:
            pass
        r = subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
            capture_output=True,
            text=True,
        )
        if r.returncode != 0:
            self.why_not = f"useradd {name} failed: {r.stderr.strip()}"
            self.log(f"NOTICE: {self.why_not}; the cut-off fault is skipped from now on")
            return None
        self.created_users.append(name)
        return pwd.getpwnam(name).pw_uid

    def _rule(self, uid):
        first, last = self.ports[0], self.ports[-1]
        return [
            "OUTPUT", "-o", "lo", "-p", "tcp", "-m", "owner", "--uid-owner", str(uid),
            "--dport", f"{first}:{last}", "-m", "comment", "--comment", COMMENT, "-j", "DROP",
        ]

    def cut(self, uid):
        """Drops every packet from `uid` to the broker ports. True when the rule is in."""
        with self.lock:
            if uid in self.active:
                return False
            rule = self._rule(uid)
            r = subprocess.run([_iptables(), "-w", "-I", *rule], capture_output=True, text=True)
            if r.returncode != 0:
                self.log(f"iptables -I failed: {r.stderr.strip()}")
                return False
            self.active[uid] = rule
            return True

    def mend(self, uid):
        with self.lock:
            rule = self.active.pop(uid, None)
            if rule is not None:
                subprocess.run([_iptables(), "-w", "-D", *rule], capture_output=True, text=True)

    def heal(self, keep_slow=False):
        """Deletes every rule this campaign put in (and any left by an earlier
        run); with `keep_slow`, not the slow network's."""
        if not self.available and not self.active:
            return
        with self.lock:
            for key, rule in self.active.items():
                for r in rule if isinstance(key, tuple) else [rule]:
                    subprocess.run([_iptables(), "-w", "-D", *r], capture_output=True, text=True)
            self.active.clear()
        self.delete_stale_rules(keep_slow)
        for node in (1, 2, 3):
            self._release_cgroup(node)

    def delete_stale_rules(self, keep_slow=False):
        for table in ("filter", "nat"):
            out = subprocess.run([_iptables(), "-w", "-t", table, "-S", "OUTPUT"], capture_output=True,
                                 text=True).stdout
            for line in out.splitlines():
                if keep_slow and SLOW_COMMENT in line:
                    continue
                if COMMENT in line and line.startswith("-A "):
                    args = line.split()[1:]
                    subprocess.run([_iptables(), "-w", "-t", table, "-D", *[a.strip('"') for a in args]],
                                   capture_output=True)

    def slow_why_not(self):
        """Why members cannot be put behind the slow network here, or None."""
        if not self.available:
            return self.why_not
        r = subprocess.run([_iptables(), "-w", "-t", "nat", "-S", "OUTPUT"], capture_output=True, text=True)
        if r.returncode != 0:
            return f"iptables has no nat table here: {r.stderr.strip()}"
        return None

    def statistic_works(self):
        """Whether the kernel takes an iptables `statistic` rule (tried on a
        rule that matches nothing, then deleted)."""
        rule = ["OUTPUT", "-o", "lo", "-p", "tcp", "--dport", "1", "-m", "statistic", "--mode", "random",
                "--probability", "0.01", "-m", "comment", "--comment", COMMENT, "-j", "DROP"]
        r = subprocess.run([_iptables(), "-w", "-I", *rule], capture_output=True, text=True)
        if r.returncode != 0:
            return False
        subprocess.run([_iptables(), "-w", "-D", *rule], capture_output=True, text=True)
        return True

    def slow(self, uids, routes, loss):
        """Sends every connection of `uids` to a broker port through its
        proxy (`routes`: broker port -> proxy port) and, when `loss` > 0,
        drops that share of the packets between those members and the
        proxies, both ways. True when every rule is in."""
        proxies = ",".join(str(p) for p in sorted(routes.values()))
        rules = []
        for uid in uids:
            for broker, proxy in sorted(routes.items()):
                rules.append(["-t", "nat", "OUTPUT", "-o", "lo", "-p", "tcp", "-m", "owner", "--uid-owner", str(uid),
                              "--dport", str(broker), "-m", "comment", "--comment", SLOW_COMMENT,
                              "-j", "REDIRECT", "--to-ports", str(proxy)])
            if loss > 0:
                rules.append(["-t", "filter", "OUTPUT", "-o", "lo", "-p", "tcp", "-m", "owner", "--uid-owner",
                              str(uid), "-m", "multiport", "--dports", proxies, "-m", "statistic", "--mode",
                              "random", "--probability", f"{loss:g}", "-m", "comment", "--comment", SLOW_COMMENT,
                              "-j", "DROP"])
        if loss > 0:
            rules.append(["-t", "filter", "OUTPUT", "-o", "lo", "-p", "tcp", "-m", "multiport", "--sports", proxies,
                          "-m", "statistic", "--mode", "random", "--probability", f"{loss:g}",
                          "-m", "comment", "--comment", SLOW_COMMENT, "-j", "DROP"])
        with self.lock:
            done = []
            for rule in rules:
                r = subprocess.run([_iptables(), "-w", rule[0], rule[1], "-I", *rule[2:]], capture_output=True,
                                   text=True)
                if r.returncode != 0:
                    self.log(f"iptables -I failed: {r.stderr.strip()}")
                    for d in done:
                        subprocess.run([_iptables(), "-w", d[0], d[1], "-D", *d[2:]], capture_output=True)
                    return False
                done.append(rule)
            self.slow_rules = done
        return True

    def slow_drops(self):
        """Packets the slow network's loss rules dropped so far."""
        out = subprocess.run([_iptables(), "-w", "-t", "filter", "-L", "OUTPUT", "-v", "-n", "-x"],
                             capture_output=True, text=True).stdout
        return sum(int(line.split()[0]) for line in out.splitlines()
                   if SLOW_COMMENT in line and "statistic" in line and line.split()[0].isdigit())

    def mend_slow(self):
        with self.lock:
            for d in self.slow_rules:
                subprocess.run([_iptables(), "-w", d[0], d[1], "-D", *d[2:]], capture_output=True)
            self.slow_rules = []

    def broker_cut_why_not(self):
        """Why a broker cannot be cut off from its peers here, or None."""
        if not self.available:
            return self.why_not
        if cgroup2_root() is None:
            return "no cgroup v2 hierarchy is mounted (the broker's own packets are matched by cgroup)"
        return None

    def cut_broker(self, node, pid, own_ports, peer_ports):
        """Cuts broker `node` (JVM `pid`) off from its peers: its inter-broker
        and controller ports `own_ports`, its packets to `peer_ports`. True
        when both rules are in."""
        root = cgroup2_root()
        group = f"{CGROUP_PREFIX}{node}"
        path = os.path.join(root, group)
        try:
            os.makedirs(path, exist_ok=True)
            with open(os.path.join(path, "cgroup.procs"), "w") as fh:
                fh.write(str(pid))
        except OSError as e:
            self.log(f"moving broker node {node} into its cgroup failed: {e}")
            return False
        ports = lambda ps: ",".join(str(p) for p in ps)  # noqa: E731
        rules = [
            ["OUTPUT", "-o", "lo", "-p", "tcp", "-m", "multiport", "--dports", ports(own_ports),
             "-m", "comment", "--comment", COMMENT, "-j", "DROP"],
            ["OUTPUT", "-o", "lo", "-p", "tcp", "-m", "cgroup", "--path", group, "-m", "multiport",
             "--dports", ports(peer_ports), "-m", "comment", "--comment", COMMENT, "-j", "DROP"],
        ]
        with self.lock:
            done = []
            for rule in rules:
                r = subprocess.run([_iptables(), "-w", "-I", *rule], capture_output=True, text=True)
                if r.returncode != 0:
                    self.log(f"iptables -I failed: {r.stderr.strip()}")
                    for d in done:
                        subprocess.run([_iptables(), "-w", "-D", *d], capture_output=True, text=True)
                    self._release_cgroup(node)
                    return False
                done.append(rule)
            self.active[("broker", node)] = done
        # A socket keeps the cgroup it was made in: the broker's connections
        # to its peers made before the move are ended (ss -K), and the ones
        # it makes again are in the group, so dropped.
        self._end_connections(pid, set(peer_ports))
        return True

    def _end_connections(self, pid, ports):
        """Ends every TCP connection of process `pid` to one of `ports`."""
        out = subprocess.run(["ss", "-tnpH", "state", "established"], capture_output=True, text=True).stdout
        ended = 0
        for line in out.splitlines():
            if f"pid={pid}," not in line:
                continue
            cols = line.split()
            local, peer = cols[2], cols[3]
            lport, rport = local.rsplit(":", 1)[1], peer.rsplit(":", 1)[1]
            if int(rport) in ports:
                r = subprocess.run(["ss", "-K", "sport", "=", f":{lport}", "dport", "=", f":{rport}"],
                                   capture_output=True, text=True)
                ended += r.returncode == 0
        self.log(f"ended {ended} connections of pid {pid} to its peers")

    def mend_broker(self, node):
        with self.lock:
            rules = self.active.pop(("broker", node), [])
            for rule in rules:
                subprocess.run([_iptables(), "-w", "-D", *rule], capture_output=True, text=True)
        self._release_cgroup(node)

    def _release_cgroup(self, node):
        """Moves whatever is in broker `node`'s group back to the root group
        and removes the group."""
        root = cgroup2_root()
        if root is None:
            return
        path = os.path.join(root, f"{CGROUP_PREFIX}{node}")
        if not os.path.isdir(path):
            return
        try:
            with open(os.path.join(path, "cgroup.procs")) as fh:
                pids = fh.read().split()
            for pid in pids:
                try:
                    with open(os.path.join(root, "cgroup.procs"), "w") as fh:
                        fh.write(pid)
                except OSError:
                    pass
            os.rmdir(path)
        except OSError as e:
            self.log(f"removing the cgroup of broker node {node} failed: {e}")

    def remove_users(self):
        for name in self.created_users:
            subprocess.run(["userdel", name], capture_output=True)
        self.created_users.clear()
