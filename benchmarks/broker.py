"""Owns the broker process the harness talks to: starting `python -m kbroker serve` on a free
127.0.0.1 port and a temp dir, waiting until it answers ApiVersions, stopping it by PID
(SIGTERM, then SIGKILL), and reading its CPU time and memory from /proc/<pid> (ProcGroup: several
processes summed, for the cluster phase)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import kwire

REPO_ROOT = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stat_cpu_times(stat: str) -> tuple[float, float]:
    """(utime, stime) in seconds from the text of a /proc/<pid>/stat or /proc/<pid>/task/<tid>/stat."""
    fields = stat[stat.rindex(")") + 2:].split()  # fields[0] is field 3 (state)
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


class ProcStats:
    """CPU seconds (utime+stime, all threads) and memory of a process, read from /proc."""

    def __init__(self, pid: int):
        self.pid = pid

    def cpu_times(self) -> tuple[float, float] | None:
        """(utime, stime) in seconds, or None if the process is gone."""
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return None
        return stat_cpu_times(stat)

    def cpu_seconds(self) -> float | None:
        t = self.cpu_times()
        return None if t is None else t[0] + t[1]

    def memory_mb(self) -> dict:
        """{'rss_mb': VmRSS, 'peak_rss_mb': VmHWM} in MB (10^6 bytes); {} if unreadable."""
        out = {}
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    out["rss_mb"] = int(line.split()[1]) * 1024 / 1e6
                elif line.startswith("VmHWM:"):
                    out["peak_rss_mb"] = int(line.split()[1]) * 1024 / 1e6
        except OSError:
            pass
        return out


class ProcGroup:
    """Several processes read as one (the brokers of a cluster): CPU times and memory summed.
    Same interface as ProcStats, so Meter takes either."""

    def __init__(self, pids: list[int]):
        self.members = [ProcStats(pid) for pid in pids]

    def cpu_times_each(self) -> list[tuple[float, float] | None]:
        return [m.cpu_times() for m in self.members]

    def cpu_times(self) -> tuple[float, float] | None:
        """Summed (utime, stime), or None if any of the processes is gone."""
        each = self.cpu_times_each()
        if any(t is None for t in each):
            return None
        return sum(t[0] for t in each), sum(t[1] for t in each)

    def cpu_seconds(self) -> float | None:
        t = self.cpu_times()
        return None if t is None else t[0] + t[1]

    def memory_mb(self) -> dict:
        """{'rss_mb', 'peak_rss_mb'} summed over the processes; {} if any is unreadable."""
        each = [m.memory_mb() for m in self.members]
        if not all("rss_mb" in e and "peak_rss_mb" in e for e in each):
            return {}
        return {"rss_mb": sum(e["rss_mb"] for e in each), "peak_rss_mb": sum(e["peak_rss_mb"] for e in each)}


def log_problems(path: Path, limit: int = 20) -> tuple[int, list[str]]:
    """Count ERROR/CRITICAL/Traceback lines in a broker log; return (count, first lines)."""
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return 0, []
    bad = [ln for ln in text if " ERROR " in ln or " CRITICAL " in ln or ln.startswith("Traceback")]
    return len(bad), bad[:limit]


class OwnBroker:
    """A kbroker the harness starts and stops itself, in `<base>/<name>/`."""

    def __init__(self, base: Path, name: str, overrides: list[str] = (), log_level: str = "INFO"):
        self.dir = base / name
        self.data = self.dir / "data"
        self.log_path = self.dir / "broker.log"
        self.port = free_port()
        self.overrides = [f"listeners=PLAINTEXT://127.0.0.1:{self.port}", f"log.dirs={self.data}", *overrides]
        self.log_level = log_level
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "kbroker", "serve", "--log-level", self.log_level]
        for o in self.overrides:
            cmd += ["--override", o]
        return cmd

    def stats(self) -> ProcStats | None:
        return ProcStats(self.proc.pid) if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 60.0) -> float:
        """Start the broker; return seconds from spawn until it answers ApiVersions."""
        self.dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     cwd=REPO_ROOT, start_new_session=True)
        log.close()
        self.starts += 1
        deadline = t0 + timeout
        while time.perf_counter() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode} during start:\n{self.log_tail()}")
            if kwire.probe("127.0.0.1", self.port, timeout=1.0):
                return time.perf_counter() - t0
            time.sleep(0.01)
        raise TimeoutError(f"broker not serving after {timeout:.0f}s:\n{self.log_tail()}")

    def stop(self, timeout: float = 30.0) -> float | None:
        """SIGTERM the broker by PID and wait; SIGKILL after `timeout`. Returns the shutdown time."""
        if self.proc is None:
            return None
        proc, self.proc = self.proc, None
        if proc.poll() is not None:
            return 0.0
        t0 = time.perf_counter()
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
            return time.perf_counter() - t0
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            raise TimeoutError(f"broker did not stop within {timeout:.0f}s of SIGTERM; killed")

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no broker log)"

    def log_problems(self, limit: int = 20) -> tuple[int, list[str]]:
        """Count ERROR/CRITICAL/Traceback lines in the broker log; return (count, first lines)."""
        return log_problems(self.log_path, limit)
