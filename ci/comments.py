#!/usr/bin/env python3
"""Fail on history in Rust comments: issue-tracker references and dates.

Comments state contracts and invariants; the history of a change belongs to
git and CHANGELOG.md, measurements to docs/benchmarks/. This scans the
comments (`//`, `///`, `//!`, `/* */`, `/** */`, nested) of every tracked
`.rs` file, or of the files named on the command line, and prints
`file:line: what` for each hit:

- a tracker reference: "issue 9", "issues 9 and 12", "item 8", "finding 3",
  "findings 1, 2 and 5", "PR 12", "pull request 12", "#123" (also when the
  words are split across comment lines);
- a date: "2026-12-06", "6 December 2026", "Dec 6, 2026", "December 2026".

Allowed on purpose, because a reader can look them up without this
project's tracker: identifiers of public specifications and of a
dependency's public tracker ("RFC 3339", "KIP-98", "KAFKA-12345",
"CVE-2024-1234"), a dependency's issue by its address
("https://github.com/confluentinc/librdkafka/issues/5573"); and values that
are not history: an RFC 3339 timestamp an API takes or returns
("2026-01-01T00:00:00Z"), hex digests, version numbers. A verb followed by
a number ("it issues 3 requests") reads as a reference: write the number
out. String literals are not comments and are not scanned. No tracked `.rs`
file is generated code; a generated file added later must be listed in
GENERATED below.

`--self-test` checks the patterns against the examples in SELF_TEST.

Exit status: 0 when clean, 1 on any hit.
"""

import re
import subprocess
import sys
from pathlib import Path

GENERATED = set()

MONTHS = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?"
    r"|Aug(?:ust)?|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
YEAR = r"(?:19|20)\d\d"
DAY = r"\d{1,2}(?:st|nd|rd|th)?"
NUMBER_LIST = r"#?\d+(?:\s*(?:,|and|or|to|-|–)\s*#?\d+)*"

PATTERNS = [
    (
        "issue-tracker reference",
        re.compile(
            r"\b(?:issues?|items?|findings?|PRs?|pull\s+requests?|tickets?|bugs?)"
            r"\s*(?:no\.\s*)?" + NUMBER_LIST + r"\b",
            re.IGNORECASE,
        ),
    ),
    ("issue-tracker reference", re.compile(r"(?<![\w&#/])#\d+\b")),
    (
        "date",
        re.compile(r"(?<![\w-])" + YEAR + r"-(?:0[1-9]|1[0-2])-(?:[0-2]\d|3[01])(?![\w])"),
    ),
    ("date", re.compile(r"\b" + DAY + r"\s+" + MONTHS + r"\.?,?\s+" + YEAR + r"\b")),
    ("date", re.compile(r"\b" + MONTHS + r"\.?\s+(?:" + DAY + r",?\s+)?" + YEAR + r"\b")),
]


def comments(text):
    """Yield (line, comment text) for each comment line of Rust source.

    A tokenizer just good enough for comments: it skips string, byte-string,
    raw-string and char literals so that `"// not a comment"` is not one,
    and tells a char literal from a lifetime.
    """
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            yield line, text[i + 2 : end]
            i = end
        elif text.startswith("/*", i):
            depth, j, start = 1, i + 2, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            body = text[start : j - 2 if depth == 0 else j]
            for k, part in enumerate(body.split("\n")):
                yield line + k, part
            line += body.count("\n")
            i = j
        elif c in "rb" and re.match(r"(?:br|r)#*\"", text[i:i + 260]) and (
            i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")
        ):
            m = re.match(r"(?:br|r)(#*)\"", text[i:])
            close = '"' + m.group(1)
            end = text.find(close, i + m.end())
            end = n if end < 0 else end + len(close)
            line += text.count("\n", i, end)
            i = end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            line += text.count("\n", i, j)
            i = j + 1
        elif c == "'":
            m = re.match(r"'(?:\\(?:u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'\n])'", text[i:])
            i += m.end() if m else 1
        else:
            i += 1


def scan(path):
    """Return (line, kind, matched text) hits in one file's comments.

    Consecutive comment lines are joined with a space so that a reference
    split across lines ("[issue\\n// 9, item 8]") is still found.
    """
    text = Path(path).read_text(encoding="utf-8")
    hits = []
    block, starts = "", []
    last = None

    def flush():
        covered = []
        for kind, pattern in PATTERNS:
            for m in pattern.finditer(block):
                if any(a < m.end() and m.start() < b for a, b in covered):
                    continue  # "6 December 2026" is one date, not two
                covered.append(m.span())
                idx = max(k for k, s in enumerate(starts) if s <= m.start())
                hits.append((starts_lines[idx], kind, " ".join(m.group(0).split())))

    starts_lines = []
    for line, body in comments(text):
        body = body.lstrip("/!*").strip()
        if last is not None and line != last + 1:
            flush()
            block, starts, starts_lines = "", [], []
        starts.append(len(block))
        starts_lines.append(line)
        block += body + " "
        last = line
    flush()
    return sorted(set(hits))


# (source, the hits expected in its comments, by kind)
SELF_TEST = [
    ("// Fixed for issue 9, item 8.\n", ["issue-tracker reference"] * 2),
    ("/// [issue\n/// 9, item 10] a retry is an event\n", ["issue-tracker reference"] * 2),
    ("//! model findings 1, 2 and 5\n", ["issue-tracker reference"]),
    ("/* see (#123) */\n", ["issue-tracker reference"]),
    ("// PR 12 and pull request 13\n", ["issue-tracker reference"] * 2),
    ("// measured on 2026-12-06\n", ["date"]),
    ("/** run of 6 December 2026 */\n", ["date"]),
    ("// Dec 6, 2026 and December 2026\n", ["date"] * 2),
    ("/* outer /* nested issue 4 */ still a comment: item 2 */\n", ["issue-tracker reference"] * 2),
    ("// RFC 3339, KIP-98, KAFKA-12345, CVE-2024-1234, v4.4.0, sha256 0a1b2c\n", []),
    ("// https://github.com/confluentinc/librdkafka/issues/5573\n", []),
    ("/// starts at 2026-01-01T00:00:00Z (epoch ms 1767225600000)\n", []),
    ("// #[derive(Debug)] and &#39; and a/#1\n", []),
    ('let s = "// issue 9, item 8"; let c = \'"\'; // ok\n', []),
    ('let r = r#"/* issue 9 */"#; fn f<\'a>(x: &\'a str) {} // ok\n', []),
    ("let c = '/'; // 2026-12-06\n", ["date"]),
]


def self_test():
    import tempfile

    failed = 0
    for source, expected in SELF_TEST:
        with tempfile.NamedTemporaryFile("w", suffix=".rs", delete=False) as f:
            f.write(source)
        got = sorted(kind for _, kind, _ in scan(f.name))
        Path(f.name).unlink()
        if got != sorted(expected):
            print(f"self-test: {source!r}: expected {expected}, got {got}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    root = Path(__file__).resolve().parent.parent
    if argv:
        files = argv
    else:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--", "*.rs"],
            cwd=root, check=True, capture_output=True,
        ).stdout.decode()
        files = [str(root / f) for f in out.split("\0") if f and f not in GENERATED]
    bad = 0
    for f in files:
        for line, kind, what in scan(f):
            rel = Path(f).resolve()
            try:
                rel = rel.relative_to(root)
            except ValueError:
                pass
            print(f"{rel}:{line}: {kind} in a comment: {what!r}")
            bad += 1
    if bad:
        print(
            f"{bad} hit(s): comments state contracts; history goes to git and "
            "CHANGELOG.md, measurements to docs/benchmarks/ (see ci/comments.py).",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
