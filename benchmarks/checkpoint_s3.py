"""A start's checkpoint check on S3: one reader against :data:`OBJECT_STORE_READERS` at once.

    .venv/bin/python benchmarks/checkpoint_s3.py [--batches 150] [--delay 0.01] [--rounds 2]

A recovered driver inspects its checkpoint before its session starts, and the check reads every
commit entry Spark keeps (~100: a request each). This writes a checkpoint of ``--batches``
batches to a local S3 server (moto, ``make tools``), puts a proxy in front of it that holds
every chunk ``--delay`` seconds each way (a store some milliseconds away; moto on loopback
answers in microseconds and serializes its requests), and times
:func:`operators.state.inspect` with the entries read one at a time and
``OBJECT_STORE_READERS`` at once, alternating, ``--rounds`` times each: the medians and their
ratio. The keys come from the environment, as in a pod given a Secret's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "hack" / "testbed"))


def delaying_proxy(upstream: tuple[str, int], delay: float, port: list[int]) -> None:
    """Forward loopback connections to ``upstream``, each chunk held ``delay`` seconds."""

    async def pipe(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            while data := await r.read(65536):
                await asyncio.sleep(delay)
                w.write(data)
                await w.drain()
        except OSError:
            pass
        finally:
            w.close()

    async def handle(cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        ur, uw = await asyncio.open_connection(*upstream)
        await asyncio.gather(pipe(cr, uw), pipe(ur, cw))

    async def serve() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port.append(server.sockets[0].getsockname()[1])
        await server.serve_forever()

    asyncio.run(serve())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batches", type=int, default=150)
    ap.add_argument("--delay", type=float, default=0.01)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()

    import testbed_s3

    import operators.state as state
    import operators.state.checkpoint as checkpoint
    from operators.s3a import hadoop_s3a_conf

    readers = checkpoint.OBJECT_STORE_READERS
    with testbed_s3.s3_server() as s3:
        os.environ.update(s3.env)
        s3.create_bucket("bench")
        state.configure_object_store(hadoop_s3a_conf(s3.endpoint))
        cp = checkpoint.store_of("s3a://bench/cp")
        meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1,
                "conf": {"spark.sql.shuffle.partitions": "4"}}
        cp.write_text(json.dumps({"id": "4f1c2d3e-0000-4000-8000-000000000001"}) + "\n",
                      "metadata")
        for b in range(args.batches):
            cp.write_text(f"v1\n{json.dumps(meta)}\n{{\"main\": {b}}}\n", "offsets", str(b))
            cp.write_text('v1\n{"nextBatchWatermarkMs":0}\n', "commits", str(b))
        url = urlsplit(s3.endpoint)
        port: list[int] = []
        threading.Thread(target=delaying_proxy, daemon=True,
                         args=((url.hostname or "127.0.0.1", url.port or 80), args.delay,
                               port)).start()
        while not port:
            time.sleep(0.05)
        state.configure_object_store(hadoop_s3a_conf(f"http://127.0.0.1:{port[0]}"))
        took: dict[int, list[float]] = {1: [], readers: []}
        for _ in range(args.rounds):
            for n in took:
                checkpoint.OBJECT_STORE_READERS = n
                t0 = time.monotonic()
                info = state.inspect("s3a://bench/cp")
                took[n].append(time.monotonic() - t0)
                assert info.last_committed_batch == args.batches - 1
    one, many = (statistics.median(took[n]) for n in (1, readers))
    print(f"inspect of {args.batches} batches on S3, {args.delay * 1000:g} ms per chunk each way:")
    print(f"  one reader        {one:6.2f} s  ({', '.join(f'{t:.2f}' for t in took[1])})")
    print(f"  {readers} readers at once {many:6.2f} s  "
          f"({', '.join(f'{t:.2f}' for t in took[readers])})  {many / one:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
