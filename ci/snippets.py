#!/usr/bin/env python3
"""The code blocks of the READMEs, extracted so the test command runs them:
a quick start that stops working fails CI.

    ci/snippets.py extract LANG OUT_DIR FILE...   # write each block of LANG to OUT_DIR
    ci/snippets.py run LANG OUT_DIR -- CMD...     # run CMD on each extracted file ({} is the file)

A block is a fenced code block whose info string starts with LANG (python,
js, c, kotlin, rust). An HTML comment on the line before the fence says how
it is checked; GitHub does not show it:

    <!-- snippet: fragment -->   a part of a program (names it does not
                                 define): checked by the compiler only, the
                                 run command gets KRABKA_SNIPPET_FRAGMENT=1
    (nothing)                    a whole program: compiled and run

Extraction writes OUT_DIR/<readme>-<n>.<ext> (n counts the blocks of LANG
in that file, from 1) and replaces the bootstrap address the snippets use
(127.0.0.1:19092, ci/kafka.sh's one-node cluster) with KRABKA_BOOTSTRAP when
that is set. `run` runs CMD once per extracted file, with a timeout
(KRABKA_SNIPPET_TIMEOUT seconds, 90 by default), prints each outcome and
the number run, and fails when any failed or when there was nothing to run.
"""

import os
import re
import subprocess
import sys
import time

EXT = {"python": "py", "js": "mjs", "c": "c", "kotlin": "kt", "rust": "rs"}
MARK = re.compile(r"^<!--\s*snippet:\s*(\w+)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)```(\S*)")
ADDRESS = "127.0.0.1:19092"
# The repository: file names are made from paths relative to it.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def blocks(path, lang):
    """(kind, text) of each block of `lang` in the markdown file `path`."""
    out = []
    lines = open(path, encoding="utf-8").read().splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m or not m.group(2):
            i += 1
            continue
        info = m.group(2)
        indent = len(m.group(1))
        before = lines[i - 1] if i > 0 else ""
        mark = MARK.match(before.strip())
        kind = mark.group(1) if mark else "program"
        if kind not in ("program", "fragment"):
            sys.exit(f"snippets: {path}:{i}: unknown snippet mark {kind!r} (fragment, or none)")
        body = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith("```"):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        i += 1
        if info.split(",")[0] == lang:
            out.append((kind, "\n".join(body) + "\n"))
    return out


def extract(lang, out_dir, files):
    if lang not in EXT:
        sys.exit(f"snippets: no such language {lang!r} (one of {', '.join(EXT)})")
    os.makedirs(out_dir, exist_ok=True)
    for old in os.listdir(out_dir):
        if old.endswith("." + EXT[lang]) or old.endswith(".kind"):
            os.remove(os.path.join(out_dir, old))
    bootstrap = os.environ.get("KRABKA_BOOTSTRAP") or ADDRESS
    n_all = 0
    for path in files:
        rel = os.path.relpath(os.path.abspath(path), ROOT)
        slug = re.sub(r"[^A-Za-z0-9]+", "_", rel.removesuffix(".md")).strip("_").lower()
        for n, (kind, text) in enumerate(blocks(path, lang), start=1):
            name = f"{slug}_{n}.{EXT[lang]}"
            with open(os.path.join(out_dir, name), "w", encoding="utf-8") as fh:
                fh.write(text.replace(ADDRESS, bootstrap))
            with open(os.path.join(out_dir, name + ".kind"), "w", encoding="utf-8") as fh:
                fh.write(kind + "\n")
            print(f"snippets: {path}: {lang} block {n} ({kind}) -> {os.path.join(out_dir, name)}")
            n_all += 1
    if n_all == 0:
        sys.exit(f"snippets: no {lang} block in {', '.join(files)}")


def run(lang, out_dir, cmd):
    timeout = float(os.environ.get("KRABKA_SNIPPET_TIMEOUT", "90"))
    names = sorted(f for f in os.listdir(out_dir) if f.endswith("." + EXT[lang]))
    if not names:
        sys.exit(f"snippets: nothing extracted in {out_dir}")
    failed = []
    for name in names:
        path = os.path.join(out_dir, name)
        kind = open(path + ".kind").read().strip()
        env = dict(os.environ)
        if kind == "fragment":
            env["KRABKA_SNIPPET_FRAGMENT"] = "1"
        else:
            env.pop("KRABKA_SNIPPET_FRAGMENT", None)
        argv = [a.replace("{}", path) for a in cmd]
        t0 = time.monotonic()
        try:
            r = subprocess.run(argv, env=env, timeout=timeout, capture_output=True, text=True)
            ok, why = r.returncode == 0, f"exit {r.returncode}"
            output = r.stdout + r.stderr
        except subprocess.TimeoutExpired as e:
            ok, why = False, f"no end within {timeout:.0f} s"
            output = (e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(errors="replace")
        took = time.monotonic() - t0
        print(f"snippets: {'ok  ' if ok else 'FAIL'} {name} ({kind}, {took:.1f} s{'' if ok else ', ' + why})")
        if not ok:
            failed.append(name)
            sys.stdout.write("".join(f"    {line}\n" for line in output.splitlines()[-40:]))
    print(f"snippets: {len(names) - len(failed)} of {len(names)} {lang} snippets passed")
    if failed:
        sys.exit(1)


def main(argv):
    if len(argv) >= 4 and argv[1] == "extract":
        return extract(argv[2], argv[3], argv[4:])
    if len(argv) >= 5 and argv[1] == "run" and "--" in argv:
        sep = argv.index("--")
        return run(argv[2], argv[3], argv[sep + 1:])
    sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
