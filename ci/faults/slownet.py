"""A slow, lossy network between some members and the brokers, on loopback.

This machine's kernel has no netem (`tc qdisc add dev lo root netem ...`:
"Specified qdisc kind is unknown"; CONFIG_NET_SCH_NETEM is not set and there
are no modules to load), so the delay is made in user space and the loss by
the kernel:

* **Delay: a TCP proxy per broker** (this file, run as its own process).
  Each proxy listens on the broker's port + PROXY_OFFSET and forwards to the
  broker; every chunk read from either side is written on after 20 ms +/- 10
  ms (uniform), in order (a chunk never overtakes the one before it), so a
  request and its answer each take 10 to 30 ms more. The member processes
  are not told about the proxies: an iptables `nat` rule per slow member
  (`-m owner --uid-owner U --dport BROKER -j REDIRECT --to-ports PROXY`)
  sends every connection they open to a broker's client port to its proxy.
  The cluster's advertised listeners stay as they are, inter-broker and
  controller traffic stays direct, and no other client goes through a proxy.
* **Loss: real packet loss** with iptables' `statistic` match, 1 % of the
  packets each way between a slow member and its proxy (`-m owner --uid-owner
  U -m statistic --mode random --probability 0.01 -j DROP` for what the member
  sends, `--sport PROXY` for what the proxy sends back); TCP retransmits them
  after its retransmission timeout (at least 200 ms on Linux, doubling on each
  loss of the same segment), as after a loss on a real network.
* When the `statistic` match is missing, the proxy stands in for the loss:
  with probability `--hold-prob` per chunk it holds the connection's traffic
  in that direction for 200 to 300 ms (what one lost segment costs TCP on
  loopback). The report says which one ran.

    python slownet.py --route PROXY_PORT:BROKER_PORT ... [--delay-ms 20] [--jitter-ms 10]
                      [--hold-prob 0] [--seed N] --stats FILE

It prints READY once every proxy listens, and writes its counters (JSON) to
--stats every second and when it gets SIGTERM.
"""

import argparse
import asyncio
import json
import os
import random
import signal
import sys
import time

# the proxy of a broker listens on the broker's client port + this
PROXY_OFFSET = 200
CHUNK = 65536


class Stats:
    def __init__(self):
        self.connections = 0
        self.chunks = 0
        self.bytes = 0
        self.holds = 0
        self.delay_s = 0.0
        self.max_delay_s = 0.0

    def as_dict(self):
        return {"connections": self.connections, "chunks": self.chunks, "bytes": self.bytes,
                "holds": self.holds, "mean_delay_ms": round(1000 * self.delay_s / self.chunks, 2) if self.chunks else 0,
                "max_delay_ms": round(1000 * self.max_delay_s, 2)}


async def pump(reader, writer, cfg, rng, stats):
    """Copies `reader` to `writer`, each chunk `delay +/- jitter` late, in
    order; with `hold_prob` a chunk (and the ones after it) waits 200 to 300
    ms more."""
    queue = asyncio.Queue()

    async def read():
        last = 0.0
        try:
            while True:
                data = await reader.read(CHUNK)
                now = time.monotonic()
                if not data:
                    await queue.put((max(last, now), None))
                    return
                due = now + (cfg.delay_ms + rng.uniform(-cfg.jitter_ms, cfg.jitter_ms)) / 1000.0
                if cfg.hold_prob and rng.random() < cfg.hold_prob:
                    due += rng.uniform(0.2, 0.3)
                    stats.holds += 1
                last = max(last, due)
                stats.chunks += 1
                stats.bytes += len(data)
                stats.delay_s += last - now
                stats.max_delay_s = max(stats.max_delay_s, last - now)
                await queue.put((last, data))
        except (ConnectionError, OSError):
            await queue.put((time.monotonic(), None))

    async def write():
        try:
            while True:
                due, data = await queue.get()
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                if data is None:
                    if writer.can_write_eof():
                        writer.write_eof()
                    return
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass  # the other side is gone; the handler closes both

    await asyncio.gather(read(), write())


async def serve(listen, target, cfg, rng, stats):
    async def handle(c_reader, c_writer):
        stats.connections += 1
        try:
            b_reader, b_writer = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            c_writer.close()
            return
        try:
            await asyncio.gather(pump(c_reader, b_writer, cfg, rng, stats), pump(b_reader, c_writer, cfg, rng, stats))
        finally:
            for w in (b_writer, c_writer):
                try:
                    w.close()
                except OSError:
                    pass

    return await asyncio.start_server(handle, "127.0.0.1", listen, reuse_address=True)


async def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--route", action="append", required=True, help="PROXY_PORT:BROKER_PORT")
    p.add_argument("--delay-ms", type=float, default=20.0)
    p.add_argument("--jitter-ms", type=float, default=10.0)
    p.add_argument("--hold-prob", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--stats", required=True)
    cfg = p.parse_args(argv)
    rng = random.Random(f"slownet-{cfg.seed}")
    stats = Stats()
    servers = []
    for route in cfg.route:
        listen, target = (int(x) for x in route.split(":"))
        servers.append(await serve(listen, target, cfg, rng, stats))
    print("READY", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    def dump():
        tmp = cfg.stats + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(stats.as_dict(), fh)
        os.replace(tmp, cfg.stats)

    while not stop.is_set():
        dump()
        try:
            await asyncio.wait_for(stop.wait(), 1.0)
        except asyncio.TimeoutError:
            pass
    for s in servers:
        s.close()
    dump()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
