"""End-to-end runs per second, beside the raw Celery no-op drain rate of the same broker.

System: R runs of a 2-step scripted agent (a `calculator` call, auto-allowed, then the
answer) submitted at once with `run_start` against PostgreSQL + Redis, executed by ONE
`celery -A awaken_site worker` (prefork, concurrency = nproc). Timed from the first
submit to the last run's `finished_at`.

Baseline: N no-op tasks of bench/noop_app.py enqueued at once and drained by a separate
worker with the same options; timed from the first enqueue to the last execution.

Rounds alternate baseline/system; the figure is the median of the rounds. It is context
only: its old goal (runs/s >= 0.25 x no-op/s) is retired in favour of the figures of
peers_compare.py (Awaken over HTTP beside LangGraph and DBOS), so it has no verdict.
Run alone: .venv/bin/python bench/e2e_runs.py
Django and the application are imported inside functions: they need django.setup(), which
BenchEnv.start() runs first (see bench/common.py).
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import common, fixtures
from bench.common import BenchEnv, BenchError, Figure, median, percentile

BENCHMARK = "e2e_runs"
RUNS_PER_ROUND = int(os.environ.get("BENCH_E2E_RUNS", "100"))
NOOPS_PER_ROUND = int(os.environ.get("BENCH_E2E_NOOPS", "800"))
ROUNDS = int(os.environ.get("BENCH_E2E_ROUNDS", "2"))
ROUND_TIMEOUT = 60.0
BREAKDOWN_RUNS = 10
SCRIPT = [
    {"text": "", "tool_calls": [{"name": "calculator", "arguments": {"expression": "6*7"}}]},
    {"text": "42"},
]


@dataclass
class RunsRound:
    runs: int
    seconds: float
    submit_seconds: float
    latencies_ms: list[float]  # submit -> finished, per run
    segments_ms: list[float]  # claim -> final checkpoint, per run (worker busy time)
    steps: int
    events: int

    @property
    def rate(self) -> float:
        return self.runs / self.seconds


@dataclass
class NoopRound:
    tasks: int
    seconds: float
    enqueue_seconds: float

    @property
    def rate(self) -> float:
        return self.tasks / self.seconds


def worker_args(app: str, name: str, concurrency: int) -> list[str]:
    return [
        common.PYTHON,
        "-m",
        "celery",
        "-A",
        app,
        "worker",
        "--pool",
        "prefork",
        "--concurrency",
        str(concurrency),
        "--loglevel",
        "WARNING",
        "--hostname",
        f"{name}@%h",
        "--without-gossip",
        "--without-mingle",
    ]


def runs_round(agent: Any, count: int, worker: common.Proc) -> RunsRound:
    from runs.models import Run
    from runs.services.submission_flow import run_start

    first_submit = time.time()
    started = time.monotonic()
    ids = [run_start(agent=agent, messages=f"question {i}: 6*7?").pk for i in range(count)]
    submit_seconds = time.monotonic() - started
    pending = Run.objects.filter(pk__in=ids).exclude(status=Run.Status.DONE)

    def finished() -> bool:
        if not worker.alive():
            raise BenchError(f"the runs worker died:\n{worker.log_tail()}")
        return not pending.exists()

    try:
        common.wait_for(finished, ROUND_TIMEOUT, f"{count} runs to finish", interval=0.05)
    except BenchError as exc:
        left = pending.count()
        raise BenchError(f"{exc} ({left} not done)\n{worker.log_tail()}") from None
    rows = list(
        Run.objects.filter(pk__in=ids).values_list(
            "created_at",
            "started_at",
            "finished_at",
            "status_reason",
            "final_output",
            "steps",
            "last_event_seq",
        )
    )
    wrong = [r for r in rows if (r[3], r[4]) != ("natural", "42")]
    if wrong:
        raise BenchError(f"{len(wrong)} runs ended wrongly, e.g. {wrong[0][3:5]}")
    last = max(r[2] for r in rows).timestamp()
    return RunsRound(
        runs=count,
        seconds=last - first_submit,
        submit_seconds=submit_seconds,
        latencies_ms=[(r[2] - r[0]).total_seconds() * 1000 for r in rows],
        segments_ms=[(r[2] - r[1]).total_seconds() * 1000 for r in rows],
        steps=sum(r[5] for r in rows),
        events=sum(r[6] for r in rows),
    )


def noop_round(env: BenchEnv, count: int, worker: common.Proc) -> NoopRound:
    # imported here: the app reads BENCH_CELERY_OPTIONS, which run() sets, at import
    from bench.noop_app import noop

    client = env.redis()
    key = f"bench:noop:{uuid.uuid4().hex}"
    first_enqueue = time.time_ns()
    started = time.monotonic()
    for _ in range(count):
        noop.delay(key, count)
    enqueue_seconds = time.monotonic() - started

    def finished() -> bool:
        if not worker.alive():
            raise BenchError(f"the no-op worker died:\n{worker.log_tail()}")
        return bool(client.exists(f"{key}:done_ns"))

    common.wait_for(finished, ROUND_TIMEOUT, f"{count} no-op tasks to run", interval=0.01)
    done_ns = int(client.get(f"{key}:done_ns"))
    return NoopRound(count, (done_ns - first_enqueue) / 1e9, enqueue_seconds)


class Timers:
    """Wall time spent inside some application functions (patched in this process only)."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = {}
        self.counts: dict[str, int] = {}

    def wrap(self, label: str, function: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.totals[label] = self.totals.get(label, 0.0) + time.perf_counter() - started
                self.counts[label] = self.counts.get(label, 0) + 1

        return timed


def breakdown(agent: Any, count: int) -> str:
    """Execute `count` runs in this process (no Celery) and split a run's worker time."""
    from runs import store
    from runs.services import dispatch, events, execution
    from runs.services.submission_flow import run_start

    with mock.patch.object(dispatch, "_enqueue", lambda run_id: None):
        ids = [run_start(agent=agent, messages=f"breakdown {i}: 6*7?").pk for i in range(count)]
    timers = Timers()
    patches = [
        mock.patch.object(
            execution, "run_claim_next", timers.wrap("claim", execution.run_claim_next)
        ),
        mock.patch.object(execution, "run_release", timers.wrap("release", execution.run_release)),
        mock.patch.object(execution, "load_messages", timers.wrap("load", execution.load_messages)),
        mock.patch.object(
            store.OrmCheckpointStore,
            "checkpoint",
            timers.wrap("checkpoint", store.OrmCheckpointStore.checkpoint),
        ),
        mock.patch.object(
            events, "broadcast_events", timers.wrap("broadcast", events.broadcast_events)
        ),
        mock.patch.object(store, "broadcast_live", timers.wrap("live", store.broadcast_live)),
        mock.patch.object(dispatch, "_enqueue", lambda run_id: None),
    ]
    for patch in patches:
        patch.start()
    try:
        started = time.perf_counter()
        for run_id in ids:
            execution.run_advance(run_id=run_id)
        total = time.perf_counter() - started
    finally:
        for patch in reversed(patches):
            patch.stop()
    per = {label: value * 1000 / count for label, value in timers.totals.items()}
    checkpoints = timers.counts.get("checkpoint", 0) / count
    lives = timers.counts.get("live", 0) / count
    accounted = sum(per.get(k, 0.0) for k in ("claim", "release", "load", "checkpoint", "live"))
    return (
        f"{total * 1000 / count:.0f} ms per run = claim {per.get('claim', 0):.1f}"
        f" + load messages {per.get('load', 0):.1f}"
        f" + {checkpoints:.0f} checkpoints {per.get('checkpoint', 0):.1f}"
        f" (of which on-commit broadcasts, 2 group_sends each, {per.get('broadcast', 0):.1f})"
        f" + {lives:.0f} live delta sends {per.get('live', 0):.1f}"
        f" + release {per.get('release', 0):.1f}"
        f" + the rest (run load, model, tool, lease thread) {total * 1000 / count - accounted:.1f}"
    )


def submit_rate(agent: Any, count: int) -> float:
    """run_start calls per second from one client with the workers stopped (the tasks are
    enqueued and left in the private broker): the submitting side's own ceiling."""
    from runs.services.submission_flow import run_start

    started = time.perf_counter()
    for i in range(count):
        run_start(agent=agent, messages=f"submit {i}: 6*7?")
    return count / (time.perf_counter() - started)


FLOOR_TRANSACTIONS = 300
TRANSACTIONS_PER_RUN = 3  # the run's creation, step 1's checkpoint, step 2's checkpoint + end


def orm_floor(agent: Any) -> float:
    """Step transactions per second in this process, each the least a durable step costs
    through the ORM: lock the run row, append one event, update the run row. A run needs
    TRANSACTIONS_PER_RUN of them (more statements each), so nproc x this / 3 bounds the
    runs/s any per-step ORM checkpointing can reach, before Celery, the model, the tool
    and PostgreSQL's own CPU take their share of the same cores."""
    from django.db import transaction
    from django.db.models import F
    from django.utils import timezone

    from runs.models import Run, RunEvent
    from runs.services import dispatch
    from runs.services.submission_flow import run_start

    with mock.patch.object(dispatch, "_enqueue", lambda run_id: None):
        run = run_start(agent=agent, messages="floor")
    seq = Run.objects.values_list("last_event_seq", flat=True).get(pk=run.pk)
    started = time.perf_counter()
    for _ in range(FLOOR_TRANSACTIONS):
        with transaction.atomic():
            Run.objects.select_for_update().only("id", "last_event_seq").get(pk=run.pk)
            seq += 1
            RunEvent.objects.create(
                run_id=run.pk,
                seq=seq,
                event_type="step_end",
                payload={"event_type": "step_end"},
                created_at=timezone.now(),
            )
            Run.objects.filter(pk=run.pk).update(
                last_event_seq=seq, steps=F("steps") + 1, updated_at=timezone.now()
            )
    return FLOOR_TRANSACTIONS / (time.perf_counter() - started)


def run(env: BenchEnv) -> list[Figure]:
    common.print_header("1. End-to-end runs/s vs Celery no-op drain")
    concurrency = int(os.environ.get("BENCH_E2E_CONCURRENCY", "0")) or common.nproc() or 4
    options = common.celery_settings()
    os.environ["BENCH_CELERY_OPTIONS"] = json.dumps(options)  # before importing noop_app
    print(
        f"  one prefork worker per side, --concurrency {concurrency}, acks_late="
        f"{options.get('task_acks_late')}, prefetch={options.get('worker_prefetch_multiplier')};"
        f" {RUNS_PER_ROUND} runs vs {NOOPS_PER_ROUND} no-ops per round, {ROUNDS} rounds",
        flush=True,
    )
    agent = fixtures.create_agent(SCRIPT, tools=["calculator"])
    runs, noops = alternate_rounds(env, agent, concurrency)
    runs_rate = median([r.rate for r in runs])
    noop_rate = median([n.rate for n in noops])
    print_runs_detail(runs, concurrency)
    print(
        f"  in-process breakdown ({BREAKDOWN_RUNS} runs in this process, workers stopped): "
        f"{breakdown(agent, BREAKDOWN_RUNS)}",
        flush=True,
    )
    print_bounds(agent, concurrency, noop_rate)
    figures = [
        Figure(
            benchmark=BENCHMARK,
            name="runs/s (2-step calculator run)",
            value=runs_rate,
            unit="runs/s",
            baseline_name="Celery no-op drain",
            baseline=noop_rate,
            baseline_unit="tasks/s",
            ratio=runs_rate / noop_rate,
            goal="context only (goal retired, see vs_peers)",
            met=None,
        )
    ]
    common.print_figures(figures)
    return figures


def alternate_rounds(
    env: BenchEnv, agent: Any, concurrency: int
) -> tuple[list[RunsRound], list[NoopRound]]:
    """The two workers started and warmed up, then ROUNDS no-op and runs rounds in turn."""
    worker_env = {"BENCH_CELERY_OPTIONS": os.environ["BENCH_CELERY_OPTIONS"]}
    runs_worker = env.spawn(
        "worker-runs", worker_args("awaken_site", "bench-runs", concurrency), env=worker_env
    )
    noop_worker = env.spawn(
        "worker-noop", worker_args("bench.noop_app", "bench-noop", concurrency), env=worker_env
    )
    try:
        # readiness and warm-up: both workers must have executed work (pool processes
        # forked, imports done, DB and broker connections open) before anything is timed
        warm_runs = runs_round(agent, 2 * concurrency, runs_worker)
        warm_noop = noop_round(env, 20 * concurrency, noop_worker)
        print(
            f"  warm-up: {warm_runs.runs} runs in {warm_runs.seconds:.2f}s, "
            f"{warm_noop.tasks} no-ops in {warm_noop.seconds:.2f}s",
            flush=True,
        )
        noops: list[NoopRound] = []
        runs: list[RunsRound] = []
        for index in range(ROUNDS):
            noops.append(noop_round(env, NOOPS_PER_ROUND, noop_worker))
            runs.append(runs_round(agent, RUNS_PER_ROUND, runs_worker))
            print(
                f"  round {index + 1}: no-op {noops[-1].rate:7.1f} tasks/s "
                f"(enqueue {NOOPS_PER_ROUND / noops[-1].enqueue_seconds:.0f}/s)   "
                f"runs {runs[-1].rate:6.1f} runs/s "
                f"(submit {RUNS_PER_ROUND / runs[-1].submit_seconds:.0f}/s, "
                f"{runs[-1].seconds:.2f}s)   load {common.fmt_load(os.getloadavg())}",
                flush=True,
            )
    finally:
        env.stop(runs_worker)
        env.stop(noop_worker)
    return runs, noops


def print_runs_detail(runs: list[RunsRound], concurrency: int) -> None:
    """Steps/s, submit -> done latencies and the worker time per run, over all rounds."""
    latencies = [x for r in runs for x in r.latencies_ms]
    segments = [x for r in runs for x in r.segments_ms]
    total_runs = sum(r.runs for r in runs)
    steps_rate = median([r.steps / r.seconds for r in runs])
    segment_p50 = median(segments)
    print(
        f"  runs: {steps_rate:.1f} steps/s; submit->done p50 {median(latencies):.0f} ms, "
        f"p99 {percentile(latencies, 99):.0f} ms; "
        f"{sum(r.events for r in runs) / total_runs:.1f} events and "
        f"{sum(r.steps for r in runs) / total_runs:.1f} steps per run",
        flush=True,
    )
    print(
        f"  worker time per run (claim -> final checkpoint): p50 {segment_p50:.1f} ms, "
        f"p99 {percentile(segments, 99):.1f} ms -> {concurrency} processes can finish at most "
        f"~{concurrency * 1000 / segment_p50:.0f} runs/s if nothing else ran",
        flush=True,
    )


def print_bounds(agent: Any, concurrency: int, noop_rate: float) -> None:
    """The ceilings under the runs/s figure: a minimal ORM step transaction, and the
    submission alone."""
    floor = orm_floor(agent)
    # the machine's time per run, if a run cost only its step transactions and its task
    bound = 1 / (TRANSACTIONS_PER_RUN / (concurrency * floor) + 1 / noop_rate)
    print(
        f"  bound: a minimal ORM step transaction (lock run, insert event, update run) runs "
        f"{floor:.0f}/s in one process; {TRANSACTIONS_PER_RUN} of them per run on "
        f"{concurrency} processes plus one Celery task per run leave at most "
        f"1 / ({TRANSACTIONS_PER_RUN}/{concurrency * floor:.0f} + 1/{noop_rate:.0f}) = "
        f"{bound:.0f} runs/s = {bound / noop_rate:.2f} x the no-op rate, before the model, "
        "the tool, messages, tool calls and PostgreSQL's own CPU take their share",
        flush=True,
    )
    submit = submit_rate(agent, RUNS_PER_ROUND)
    print(
        f"  submission alone: run_start from one client, workers stopped, {submit:.0f}/s = "
        f"{submit / noop_rate:.2f} x the no-op rate; runs are submitted this way above, so "
        "the runs/s figure cannot exceed it even with workers that cost nothing",
        flush=True,
    )


if __name__ == "__main__":
    common.standalone(run)
