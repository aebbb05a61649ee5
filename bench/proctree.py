"""CPU time and memory of whole process trees, read from /proc (Linux only).

A server's cost is the sum over its process and every descendant (a prefork worker's
pool children, a dev server's reloader or runners). CPU is utime + stime of each live
process plus cutime + cstime (children that exited and were waited for), so a pool child
replaced between two samples still counts. Memory is RSS and PSS (proportional set
size, from smaps_rollup: shared pages split between the processes sharing them, so the
PSS of a tree does not count the forked workers' shared pages several times).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may contain spaces
    return raw[raw.rindex(")") + 2 :].split()


def _parents() -> dict[int, int]:
    parents: dict[int, int] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields is not None:
            parents[int(entry.name)] = int(fields[1])  # field 4: ppid
    return parents


def tree_pids(roots: Iterable[int]) -> list[int]:
    """The given processes and all their live descendants."""
    parents = _parents()
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    found: list[int] = []
    stack = [pid for pid in roots if pid in parents]
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, []))
    return found


def cpu_seconds(roots: Iterable[int]) -> float:
    """user + system CPU seconds of the trees under `roots` (including reaped children)."""
    total = 0
    for pid in tree_pids(roots):
        fields = _stat_fields(pid)
        if fields is None:
            continue
        # fields 14-17 (utime, stime, cutime, cstime) are at 11..14 here
        total += sum(int(value) for value in fields[11:15])
    return total / CLOCK_TICKS


@dataclass
class Memory:
    rss_mb: float
    pss_mb: float
    processes: int


def memory(roots: Iterable[int]) -> Memory:
    """Summed RSS and PSS (MB) of the trees under `roots`."""
    rss_kb = pss_kb = 0
    pids = tree_pids(roots)
    for pid in pids:
        try:
            text = (PROC / str(pid) / "smaps_rollup").read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("Rss:"):
                rss_kb += int(line.split()[1])
            elif line.startswith("Pss:"):
                pss_kb += int(line.split()[1])
    return Memory(rss_kb / 1024, pss_kb / 1024, len(pids))
