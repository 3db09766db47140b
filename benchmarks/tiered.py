"""The `tiered` phase (also `python -m benchmarks.tiered`): consume throughput from the tiered storage archive against the
same data read from the local log, on one broker of its own (a temp dir, a free 127.0.0.1 port).

Two topics get the same load (1 KiB messages, 16 MiB segments, librdkafka producer): `local`
keeps everything on the local disk; `tiered` has `remote.storage.enable` with
`local.retention.ms=1`, so once its closed segments are archived (directory store) only the active
segment stays local and a consumer from offset 0 reads almost everything from the archive. Both
are read from the beginning with librdkafka (`consume_run`, as the main harness's consume phase).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from benchmarks.broker import OwnBroker
from benchmarks.clients import consume_run, create_topics, produce_run


def _archived(data: Path, topic: str, partitions: int) -> bool:
    return all(len(list((data / f"{topic}-{p}").glob("*.log"))) == 1 for p in range(partitions))


def measure(mb: int, partitions: int = 2, repeat: int = 3) -> dict:
    """Produce `mb` MB to each topic, wait for the archive, read each `repeat` times; the best read
    of each topic, its runs and the archived size."""
    count = mb * 1024
    with tempfile.TemporaryDirectory(prefix="kbroker-bench-tiered-") as tmp:
        base = Path(tmp)
        broker = OwnBroker(base, "broker", [
            "remote.log.storage.system.enable=true", "remote.log.manager.task.interval.ms=500",
            f"rsm.config.dir={base / 'archive'}", "log.retention.check.interval.ms=500",
            "log.segment.delete.delay.ms=0"])
        broker.start()
        try:
            segment = {"segment.bytes": str(16 * 1024 * 1024)}
            create_topics(broker.bootstrap, [("local", partitions, segment),
                                             ("tiered", partitions, {**segment, "remote.storage.enable": "true",
                                                                     "local.retention.ms": "1"})])
            for topic in ("local", "tiered"):
                produce_run(broker.bootstrap, topic, partitions, 1024, count, "1", time.perf_counter() + 600)
            deadline = time.monotonic() + 300
            while not _archived(broker.data, "tiered", partitions):
                if time.monotonic() > deadline:
                    raise TimeoutError("the tiered topic's closed segments were not archived in 300 s")
                time.sleep(0.2)
            rows: dict = {}
            for topic in ("local", "tiered"):
                runs = [consume_run(broker.bootstrap, topic, partitions, time.perf_counter() + 600,
                                    isolation="read_uncommitted") for _ in range(repeat)]
                best = max(runs, key=lambda r: r["mb_s"])
                assert best["messages"] == count and not best["errors"], best
                rows[topic] = {"mb_s": round(best["mb_s"], 1), "msgs_s": round(best["msgs_s"]),
                               "all_mb_s": [round(r["mb_s"], 1) for r in runs]}
            archived = sum(p.stat().st_size for p in (base / "archive").rglob("*.log"))
            rows["archived_mb"] = round(archived / 1e6, 1)
        finally:
            broker.stop()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tiered", description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=256, help="megabytes produced per topic (default 256)")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3, help="reads of each topic; the best is reported")
    args = parser.parse_args(argv)
    rows = measure(args.mb, args.partitions, args.repeat)
    print(json.dumps(rows, indent=1))
    print(f"consume from the archive: {rows['tiered']['mb_s']} MB/s; from the local log: {rows['local']['mb_s']} MB/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
