"""The `fixture` phase: how fast `kbroker.testing.KafkaContainer` gives a test a broker. For each
mode (a thread of the test process, a child process) a fresh interpreter imports kbroker.testing
and starts a broker (cold: what the first test of a suite waits, the imports included), then
stops and starts it again `repeats` times (warm: each later start). Times are from `start()`'s call
to its return, which is once the broker serves on its port."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

def measure(mode: str, repeats: int) -> dict:
    """Start times of one mode, from a fresh interpreter."""
    probe = ("import json, sys, time\n"
             "t0 = time.monotonic()\n"
             "from kbroker.testing import KafkaContainer\n"
             "imported = time.monotonic() - t0\n"
             "times = []\n"
             "for _ in range(int(sys.argv[2]) + 1):\n"
             "    t = time.monotonic()\n"
             "    broker = KafkaContainer(mode=sys.argv[1]).start()\n"
             "    times.append(time.monotonic() - t)\n"
             "    broker.stop()\n"
             "print(json.dumps({'import_s': imported, 'times': times}))\n")
    out = subprocess.run([sys.executable, "-c", probe, mode, str(repeats)], capture_output=True, text=True,
                         timeout=120 + 30 * repeats, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    cold, warm = result["times"][0], result["times"][1:]
    return {"cold_start_ms": (result["import_s"] + cold) * 1000, "p50_ms": statistics.median(warm) * 1000,
            "max_ms": max(warm) * 1000, "starts": len(warm)}
