"""The broker's own record of who wrote each batch: the producer id and epoch
in the batch headers of a data topic's log segments, read with Kafka's
DumpLogSegments tool from the partition leader's log directory (only for a
cluster that ci/kafka.sh runs on this machine).

A guarded record's value carries the token its writer believes it holds; the
batch header carries the producer id and epoch the broker validated. They
must be equal: a producer whose epoch moved under it (librdkafka bumps it
itself after some aborts, KIP-360) would otherwise write records whose value
tells a stale token.
"""

import glob
import os
import re
import subprocess

BATCH = re.compile(
    r"baseOffset: (\d+) lastOffset: (\d+) .*?producerId: (-?\d+) producerEpoch: (-?\d+) .*?isControl: (\w+)"
)


def log_dir(repo, node):
    state = os.environ.get("KAFKA_STATE_DIR") or os.path.join(repo, ".kafka")
    return os.path.join(state, "c3", f"n{node}", "data")


def batches(repo, partition_dirs, timeout=300):
    """{partition dir: [(base, last, producer id, epoch)]} of the data
    batches (control batches left out) in every segment of each directory."""
    files = []
    for d in partition_dirs:
        files += sorted(glob.glob(os.path.join(d, "*.log")))
    out = {d: [] for d in partition_dirs}
    if not files:
        return out
    r = subprocess.run(
        ["bash", os.path.join(repo, "ci", "kafka.sh"), "tool", "kafka.tools.DumpLogSegments",
         "--files", ",".join(files)],
        cwd=repo, capture_output=True, text=True, timeout=timeout,
    )
    if r.returncode != 0:
        raise RuntimeError(f"DumpLogSegments failed ({r.returncode}): {r.stderr[-1000:]}")
    current = None
    for line in r.stdout.splitlines():
        if line.startswith("Dumping "):
            current = os.path.dirname(line[len("Dumping "):].strip())
            continue
        m = BATCH.search(line)
        if m and current in out and m.group(5) == "false":
            out[current].append((int(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(4))))
    return out


def check(records, tokens, batch_list):
    """Problems where a committed record's value token (`tokens[offset]`)
    differs from its batch header, or its batch is missing."""
    problems = []
    spans = sorted(batch_list)
    i = 0
    for offset, _, _ in records:
        while i < len(spans) and spans[i][1] < offset:
            i += 1
        if i >= len(spans) or spans[i][0] > offset:
            problems.append(f"offset {offset}: no batch holds it in the leader's log segments")
            continue
        header = (spans[i][2], spans[i][3])
        value = tokens.get(offset)
        if value is not None and header != value:
            problems.append(f"offset {offset}: the value says token {value[0]}/{value[1]}, "
                            f"the broker wrote the batch with {header[0]}/{header[1]}")
    return problems
