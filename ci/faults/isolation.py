"""Cutting one member off from the brokers: each member slot runs under a
uid of its own, and an iptables owner rule drops that uid's packets to the
broker ports on loopback. Every rule carries the comment below, so a clean-up
(this module's heal, or ci/faults.sh's trap) finds and deletes them all.
"""

import os
import pwd
import shutil
import subprocess
import threading

COMMENT = "krabka-faults"
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

    def heal(self):
        """Deletes every rule this campaign put in (and any left by an earlier run)."""
        if not self.available and not self.active:
            return
        with self.lock:
            for rule in self.active.values():
                subprocess.run([_iptables(), "-w", "-D", *rule], capture_output=True, text=True)
            self.active.clear()
        self.delete_stale_rules()

    def delete_stale_rules(self):
        out = subprocess.run([_iptables(), "-w", "-S", "OUTPUT"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if COMMENT in line and line.startswith("-A "):
                args = line.split()[1:]
                subprocess.run([_iptables(), "-w", "-D", *[a.strip('"') for a in args]], capture_output=True)

    def remove_users(self):
        for name in self.created_users:
            subprocess.run(["userdel", name], capture_output=True)
        self.created_users.clear()
