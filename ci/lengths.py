#!/usr/bin/env python3
"""Fail on a long production Rust file that does not say why it is long.

Modules are a few hundred lines along real seams. This counts the production
lines of every tracked `.rs` file under `core/src`, `kafka/src` and
`kafka/backoff/src` (or of the files named on the command line): all its
lines except those of inline test modules (`#[cfg(test)]` followed by
`mod name {` at the start of a line, up to its closing `}` at the start of
a line). Files named `tests.rs` and files under a `tests/` directory are
tests and are not counted.

A file over LIMIT production lines passes only if its module doc (the
`//!` lines it opens with) has a line starting with the marker

    //! Long module: <the reason, in words>

and a reason after it. Otherwise this prints `file: N production lines (over
LIMIT), and its module doc gives no reason (...)` and fails.

Functions over about 80 lines are clippy's (`too_many_lines`, threshold in
clippy.toml); this checks files only.

`--self-test` checks the counting and the marker on the examples in
SELF_TEST.

Exit status: 0 when clean, 1 on any long file without a reason.
"""

import re
import subprocess
import sys
from pathlib import Path

LIMIT = 500
ROOTS = ("core/src", "kafka/src", "kafka/backoff/src")
MARKER = "//! Long module:"

TEST_MODULE = re.compile(r"^mod\s+\w+\s*\{")


def production_lines(text):
    """The number of lines of `text` outside inline `#[cfg(test)]` modules."""
    lines = text.splitlines()
    count = 0
    i = 0
    while i < len(lines):
        if lines[i].startswith("#[cfg(test)]"):
            j = i + 1
            while j < len(lines) and lines[j].startswith("#["):
                j += 1
            if j < len(lines) and TEST_MODULE.match(lines[j]):
                k = j + 1
                while k < len(lines) and not lines[k].startswith("}"):
                    k += 1
                i = k + 1
                continue
        count += 1
        i += 1
    return count


def stated_reason(text):
    """The reason the module doc gives for the file's length, or None."""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped.startswith("//!"):
            if stripped == "" or stripped.startswith("#!["):
                continue
            break
        if stripped.startswith(MARKER):
            reason = stripped[len(MARKER):].strip()
            return reason or None
    return None


def check(path, text):
    """A message for a long file without a reason, or None."""
    n = production_lines(text)
    if n <= LIMIT or stated_reason(text):
        return None
    return (
        f"{path}: {n} production lines (over {LIMIT}), and its module doc "
        f"gives no reason (a line `{MARKER} <why>`): split it along a seam, "
        "or say why it is one module"
    )


def is_test_file(path):
    p = Path(path)
    return p.name == "tests.rs" or "tests" in p.parts[:-1]


def tracked_files():
    out = subprocess.run(
        ["git", "ls-files", "--", *(f"{r}/*.rs" for r in ROOTS)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [f for f in out.splitlines() if not is_test_file(f)]


SELF_TEST_SHORT = "//! A module.\nfn f() {}\n"
SELF_TEST_LONG = "//! A module.\n" + "fn f() {}\n" * (LIMIT + 1)
SELF_TEST_LONG_TESTS = (
    "//! A module.\n"
    + "fn f() {}\n" * (LIMIT - 5)
    + "#[cfg(test)]\nmod tests {\n"
    + "    fn t() {}\n" * 100
    + "}\n"
)
SELF_TEST_LONG_OUT_OF_LINE = (
    "//! A module.\n#[cfg(test)]\nmod tests;\n" + "fn f() {}\n" * LIMIT
)
SELF_TEST_REASON = (
    "//! A module.\n//!\n//! Long module: one table of every code, kept whole.\n"
    + "fn f() {}\n" * (LIMIT + 1)
)
SELF_TEST_EMPTY_REASON = "//! A module.\n//! Long module:\n" + "fn f() {}\n" * (LIMIT + 1)
SELF_TEST_REASON_NOT_IN_DOC = (
    "//! A module.\nfn g() {}\n// Long module: not the module doc.\n"
    + "fn f() {}\n" * (LIMIT + 1)
)


def self_test():
    cases = [
        ("short", SELF_TEST_SHORT, True),
        ("long", SELF_TEST_LONG, False),
        ("long only with its inline tests", SELF_TEST_LONG_TESTS, True),
        ("long beside an out-of-line test module", SELF_TEST_LONG_OUT_OF_LINE, False),
        ("long with a reason", SELF_TEST_REASON, True),
        ("long with an empty reason", SELF_TEST_EMPTY_REASON, False),
        ("long with the marker outside the module doc", SELF_TEST_REASON_NOT_IN_DOC, False),
    ]
    failed = [name for name, text, ok in cases if (check("x.rs", text) is None) != ok]
    if not is_test_file("core/src/transport/kafka/protocol_lease/tests.rs") or is_test_file(
        "core/src/clock.rs"
    ):
        failed.append("test-file detection")
    for name in failed:
        print(f"lengths.py self-test failed: {name}", file=sys.stderr)
    return not failed


def main(argv):
    if argv[1:] == ["--self-test"]:
        return 0 if self_test() else 1
    named = argv[1:]
    files = named or tracked_files()
    hits = []
    for f in files:
        text = Path(f).read_text(encoding="utf-8")
        msg = check(f, text)
        if msg:
            hits.append(msg)
    for h in hits:
        print(h, file=sys.stderr)
    if hits:
        print(f"lengths: {len(hits)} problem(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
