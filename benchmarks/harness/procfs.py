"""Facts about processes read from ``/proc`` (Linux): resident set, private memory, CPU seconds, start time.

A benchmark reads its own process and others (a Ray host, Ray's daemons, whatever else runs on a
shared machine), so every probe takes a pid.
"""

from __future__ import annotations

import collections
import os
import time

from benchmarks.harness.model import BenchModel

__all__ = [
    "RAY_MARKS",
    "CpuWindow",
    "Smaps",
    "alive",
    "cpu_by_process",
    "cpu_seconds",
    "machine_busy_seconds",
    "private_bytes",
    "proc_status",
    "process_started_at",
]

TICK = os.sysconf("SC_CLK_TCK")
# Command-line marks of Ray's own processes (raylet, GCS, workers, the dashboard).
RAY_MARKS = ("raylet", "gcs_server", "ray::", "default_worker", "/ray/", "ray/_private", "dashboard")


def proc_status(pid: int | str = "self") -> dict[str, int]:
    """VmRSS and VmHWM (the peak) of a process, in bytes."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) * 1024
    return out


class Smaps(BenchModel):
    """Resident, proportional and private (unshared) bytes of a process (``smaps_rollup``)."""

    rss: int
    pss: int
    private: int


def private_bytes(pid: int) -> Smaps:
    """Rss, Pss and Private_Clean + Private_Dirty of a process: what it adds beside shared pages."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("Rss", "Pss", "Private_Clean", "Private_Dirty"):
                out[key] = int(value.split()[0]) * 1024
    return Smaps(rss=out["Rss"], pss=out["Pss"], private=out["Private_Clean"] + out["Private_Dirty"])


def _stat_fields(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / TICK


def alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie."""
    try:
        return _stat_fields(pid)[0] != "Z"
    except OSError:
        return False


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine spent not idle (all cores)."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    return (sum(values) - values[3] - values[4]) / TICK


def process_started_at(pid: int) -> float:
    """When a process started, in epoch seconds (boot time + its start tick)."""
    with open("/proc/stat") as f:
        btime = next(int(line.split()[1]) for line in f if line.startswith("btime"))
    return btime + int(_stat_fields(pid)[19]) / TICK


def cpu_by_process(client_pid: int, host_pid: int) -> dict[str, float]:
    """CPU seconds so far of every process, summed by group: client, host, Ray's others, unrelated."""
    groups: dict[str, float] = collections.defaultdict(float)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            seconds = cpu_seconds(pid)
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # gone meanwhile
        if pid == client_pid:
            group = "client"
        elif pid == host_pid:
            group = "host"
        elif any(mark in cmdline for mark in RAY_MARKS):
            group = "ray_other"  # raylet, GCS, the supervisor, idle workers
        else:
            group = "unrelated"  # whatever else runs on this machine (other jobs, the kernel's threads)
        groups[group] += seconds
    return dict(groups)


class CpuWindow:
    """CPU seconds of the client, the host, Ray's other processes, the rest and the machine over a window."""

    def __init__(self, host_pid: int) -> None:
        self.host_pid = host_pid
        self.groups = cpu_by_process(os.getpid(), host_pid)
        self.machine = machine_busy_seconds()
        self.wall = time.perf_counter()

    def close(self) -> dict[str, float]:
        """The window's figures: wall seconds, the machine's busy CPU, and CPU seconds by group."""
        wall = time.perf_counter() - self.wall
        groups = cpu_by_process(os.getpid(), self.host_pid)
        machine = machine_busy_seconds() - self.machine
        out: dict[str, float] = {
            "wall_s": round(wall, 3),
            "machine_busy_cpu_s": round(machine, 3),
            "machine_cpus_busy": round(machine / wall, 3),
        }
        for group in ("client", "host", "ray_other", "unrelated"):
            out[f"{group}_cpu_s"] = round(groups.get(group, 0.0) - self.groups.get(group, 0.0), 3)
        return out
