"""Retention while serving, for the scale benchmark: `manage.py prune_runs` removes ~100,000
old runs in a subprocess while one thread keeps requesting the runs list and another keeps
writing runs as a worker would, each every 20 ms after a baseline; between its requests
the reader samples what the writer's backend waits on. Goal: neither waits more than
200 ms above its own baseline p50.

Django and the application are imported inside the functions: they need django.setup(),
which runs after the environment is set (see bench/scale_setup.py)."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import scale_data
from bench.common import ROOT, percentile, print_header
from bench.scale_pages import get
from bench.scale_report import Row
from bench.scale_setup import use_database
from bench.scale_specs import HOST, Target

RETENTION_RUNS = 100_000  # at scale 1
RETENTION_BLOCK_MS = 200.0
RETENTION_BASELINE_S = 10.0
PRUNE_TIMEOUT_S = 20 * 60


@dataclass
class Loop:
    """A thread repeating one operation and recording (phase, ms) samples; `after` runs
    untimed after each one."""

    name: str
    operation: Callable[[], None]
    phase: list[str]
    setup: Callable[[], None] | None = None
    after: Callable[[str], None] | None = None
    samples: list[tuple[str, float]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    pause_s: float = 0.02

    def run(self) -> None:
        from django.db import connection

        try:
            if self.setup is not None:
                self.setup()
            while not self.stop.is_set():
                phase = self.phase[0]
                started = time.perf_counter()
                try:
                    self.operation()
                except Exception as exc:
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                    if len(self.errors) > 20:
                        return
                self.samples.append((phase, (time.perf_counter() - started) * 1000))
                if self.after is not None:
                    try:
                        self.after(phase)
                    except Exception as exc:
                        self.errors.append(f"watcher: {type(exc).__name__}: {exc}")
                time.sleep(self.pause_s)
        finally:
            connection.close()

    def of(self, phase: str) -> list[float]:
        return [ms for p, ms in self.samples if p == phase]


@dataclass
class WaitWatcher:
    """What the writer's backend is waiting on while the prune runs, sampled from
    pg_stat_activity by the reader's connection between its (timed) requests: on CPU,
    a lock (and the statement holding it), WAL or disk I/O."""

    writer_pid: list[int] = field(default_factory=list)
    samples: dict[str, int] = field(default_factory=dict)
    blockers: dict[str, str] = field(default_factory=dict)

    def record_writer(self) -> None:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            self.writer_pid.append(int(cursor.fetchone()[0]))

    def sample(self, phase: str) -> None:
        from django.db import connection

        if phase != "prune" or not self.writer_pid:
            return
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT a.wait_event_type, a.wait_event, (SELECT left(b.query, 200) FROM"
                " pg_stat_activity b WHERE b.pid = ANY(pg_blocking_pids(a.pid)) LIMIT 1)"
                " FROM pg_stat_activity a WHERE a.pid = %s AND a.state = 'active'",
                [self.writer_pid[0]],
            )
            row = cursor.fetchone()
        if row is None:
            return
        kind = f"{row[0]}:{row[1]}" if row[0] else "on CPU"
        self.samples[kind] = self.samples.get(kind, 0) + 1
        if row[2]:
            self.blockers.setdefault(kind, " ".join(row[2].split()))

    def report(self) -> None:
        total = sum(self.samples.values())
        if not total:
            print("  writer's backend: never seen active in a sample during the prune", flush=True)
            return
        parts = ", ".join(
            f"{kind} {n}" for kind, n in sorted(self.samples.items(), key=lambda kv: -kv[1])
        )
        print(f"  writer's backend while active during the prune ({total} samples): {parts}")
        for kind, query in self.blockers.items():
            print(f"    {kind} blocked by: {query}", flush=True)


@dataclass
class Serving:
    """The reader's and the writer's loops while the prune runs, and their threads."""

    loops: list[Loop]
    phase: list[str]  # "baseline", then "prune", then "after"
    watcher: WaitWatcher
    threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> None:
        self.threads = [
            threading.Thread(target=loop.run, name=loop.name, daemon=True) for loop in self.loops
        ]
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        for loop in self.loops:
            loop.stop.set()
        for thread in self.threads:
            thread.join(timeout=60)


def measure_retention(big: Target, scale: float, batch_size: int | None) -> list[Row]:
    print_header("4. Retention while serving: prune_runs under reads and writes")
    skipped = skip_row(big)
    if skipped is not None:
        return [skipped]
    use_database(big.db)
    wanted = max(1, round(RETENTION_RUNS * scale))
    days = prune_horizon(wanted, batch_size)
    before = scale_data.table_counts()
    serving = serve(big, writer_targets(big))
    serving.start()
    time.sleep(RETENTION_BASELINE_S)
    code, took, output = run_prune(days, batch_size, serving.phase)
    time.sleep(2)
    serving.stop()
    print(f"  prune_runs exited {code} after {took:.1f}s; its last lines:", flush=True)
    for line in output[-15:]:
        print("    | " + line, flush=True)
    use_database(big.db)
    after = scale_data.table_counts()
    print_row_changes(before, after)
    serving.watcher.report()
    if big.loaded is not None:
        big.loaded.pruned = True
        big.loaded.counts = after
        scale_data.write_meta(big.loaded)
    rows = [
        Row(
            "prune_runs",
            f"exit {code}, {took:.0f}s, {before['runs_run'] - after['runs_run']:,} runs removed",
            f"~{wanted:,} runs removed, exit 0",
            "met" if code == 0 and before["runs_run"] > after["runs_run"] else "NOT met",
        )
    ]
    return rows + [loop_row(loop) for loop in serving.loops]


def skip_row(big: Target) -> Row | None:
    """Why the phase cannot run here (no prune command, data already pruned), if so."""
    from django.core.management import get_commands

    if "prune_runs" not in get_commands():
        note = "skipped: manage.py prune_runs does not exist (yet)"
        print(f"  {note}", flush=True)
        return Row("retention while serving", "skipped", "", "n/a (no prune_runs)")
    if big.loaded and big.loaded.pruned:
        note = "skipped: this database was pruned by an earlier run; run without --reuse"
        print(f"  {note}", flush=True)
        return Row("retention while serving", "skipped", "", "n/a (already pruned)")
    return None


def prune_horizon(wanted: int, batch_size: int | None) -> int:
    """The prune goes by finished_at: the days that leave ~`wanted` finished runs older."""
    from django.db import connection

    from runs.models import Run

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT finished_at FROM runs_run WHERE status = 'done' AND finished_at IS NOT NULL"
            " ORDER BY finished_at OFFSET %s LIMIT 1",
            [wanted],
        )
        row = cursor.fetchone()
    now = dt.datetime.now(dt.UTC)
    oldest = row[0] if row else now
    days = max(1, round((now - oldest).total_seconds() / 86400))
    older = Run.objects.filter(
        status=Run.Status.DONE, finished_at__lt=now - dt.timedelta(days=days)
    ).count()
    print(
        f"  prune_runs --older-than-days {days} --batch-size {batch_size or 'default'}: "
        f"{older:,} runs finished before that (~{wanted:,} wanted)",
        flush=True,
    )
    return days


def writer_targets(big: Target) -> list[tuple[Any, Any]]:
    """(run, thread) pairs the writer cycles through: the 100 newest done runs, the huge
    run and the big thread's newest run."""
    from runs.models import Run

    targets = list(
        Run.objects.filter(status=Run.Status.DONE)
        .order_by("-created_at")
        .values_list("pk", "thread_id")[:100]
    )
    fixtures = big.fixtures
    for key in ("huge_run",):
        if key in fixtures:
            targets += list(Run.objects.filter(pk=fixtures[key]).values_list("pk", "thread_id"))
    targets += list(
        Run.objects.filter(thread_id=fixtures.get("big_thread"))
        .order_by("-created_at")
        .values_list("pk", "thread_id")[:1]
    )
    return targets


def serve(big: Target, targets: list[tuple[Any, Any]]) -> Serving:
    """The reader (the runs list's first page, logged in) and the writer (a worker's step
    in miniature), each on its own connection once its thread starts."""
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction
    from django.db.models.functions import Now
    from django.test import Client

    from runs.models import Run, Thread

    reader = Client(HTTP_HOST=HOST)
    reader.force_login(get_user_model().objects.get(username=scale_data.ADMIN))
    connection.close()  # this thread stays off the database while the phase runs

    def read() -> None:
        get(reader, "/runs/")

    position = [0]

    def write() -> None:
        """A worker's step in miniature: lock the run, touch it and its thread."""
        run_id, thread_id = targets[position[0] % len(targets)]
        position[0] += 1
        with transaction.atomic():
            list(Run.objects.select_for_update().filter(pk=run_id).values_list("pk"))
            Run.objects.filter(pk=run_id).update(updated_at=Now())
            Thread.objects.filter(pk=thread_id).update(updated_at=Now())

    phase = ["baseline"]
    watcher = WaitWatcher()
    loops = [
        Loop("runs list /runs/", read, phase, after=watcher.sample),
        Loop("run write (lock+update)", write, phase, setup=watcher.record_writer),
    ]
    return Serving(loops, phase, watcher)


def run_prune(days: int, batch_size: int | None, phase: list[str]) -> tuple[int, float, list[str]]:
    """`manage.py prune_runs` in its own process group; the phase is "prune" meanwhile.
    Returns its exit code, its time and its output's lines."""
    log_path = Path(tempfile.mkstemp(prefix="awaken-bench-scale-prune-", suffix=".log")[1])
    command = [
        sys.executable,
        str(ROOT / "manage.py"),
        "prune_runs",
        "--older-than-days",
        str(days),
        *(["--batch-size", str(batch_size)] if batch_size else []),
    ]
    phase[0] = "prune"
    started = time.monotonic()
    with open(log_path, "w") as log:
        child = subprocess.Popen(
            command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            code = child.wait(timeout=PRUNE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGTERM)  # its own process group: only our child
            code = child.wait(timeout=30)
            print(f"  prune_runs did not finish in {PRUNE_TIMEOUT_S}s: stopped", flush=True)
    took = time.monotonic() - started
    phase[0] = "after"
    output = log_path.read_text(errors="replace").strip().splitlines()
    return code, took, output


def print_row_changes(before: dict[str, int], after: dict[str, int]) -> None:
    changes = []
    for table, count in before.items():
        if count >= 0 and after.get(table, -1) >= 0:
            delta = count - after[table]
            sign = "" if delta == 0 else "+" if delta < 0 else "-"
            changes.append(f"{table.removeprefix('runs_')} {sign}{abs(delta):,}")
    print("  rows: " + ", ".join(changes), flush=True)


def loop_row(loop: Loop) -> Row:
    """The loop's worst latency during the prune against its baseline p50 + the limit."""
    baseline, during = loop.of("baseline"), loop.of("prune")
    if loop.errors:
        print(f"  {loop.name}: {len(loop.errors)} errors, first: {loop.errors[0]}", flush=True)
    if not baseline or not during:
        return Row(f"retention: {loop.name}", "no samples", "", "ERROR")
    base_p50 = percentile(baseline, 50)
    limit = base_p50 + RETENTION_BLOCK_MS
    worst = max(during)
    over = sum(1 for ms in during if ms > limit)
    print(
        f"  {loop.name:<26} baseline p50 {base_p50:7.1f} p99 {percentile(baseline, 99):7.1f} "
        f"max {max(baseline):7.1f} ms (n={len(baseline)}) | during prune p50 "
        f"{percentile(during, 50):7.1f} p99 {percentile(during, 99):7.1f} max {worst:7.1f} ms "
        f"(n={len(during)})",
        flush=True,
    )
    return Row(
        f"retention: {loop.name} max during prune",
        f"{worst:,.1f} ms (p99 {percentile(during, 99):,.1f}; {over} of "
        f"{len(during)} over the limit)",
        f"<= baseline p50 + {RETENTION_BLOCK_MS:.0f} = {limit:,.0f} ms",
        "met" if worst <= limit and not loop.errors else "NOT met",
    )
