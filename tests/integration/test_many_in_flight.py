"""Durability with many runs in flight in one worker process, against real processes
(PostgreSQL, Redis, `celery worker`, `celery beat`, see conftest.py) and a real
OpenAI-compatible model server in its own process (bench/model_server.py: a fixed delay
per answer, the calculator agent's two calls, calls counted per run by the run's first
user message).

- SIGKILL of the worker three times with hundreds of model-bound runs in flight: every
  run ends `natural_end` once, gap-free, every activation closed, and no model call is
  made again except the ones in progress at a kill (or in a segment that logged it lost
  its lease: a process too busy to renew one in time counts as dead).
- Redis restarted under load: no run lost, the (supervised) worker keeps serving.
- Cancel of a run waiting on its model ends the run AND closes the model's connection
  within a second.
- A priority-0 run submitted while the process is at its limit of runs in flight starts
  next, before the low-priority runs queued earlier."""

from __future__ import annotations

import re
import socket
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agents.models import Agent, Model, ModelProvider
from bench.model_server import ModelServerProcess
from runs.models import Run, RunEvent
from runs.runtime.events import ACTIVATION_INTERRUPTED, TERMINAL_EVENT_TYPES
from runs.services.runs import run_cancel
from runs.services.submission_flow import run_start
from tests.factories import AgentFactory, scripted_agent
from tests.integration.conftest import SupervisedProc, redis_restart
from tests.processes import Proc, service_command, wait_for, wait_ready

pytestmark = pytest.mark.slow

IN_FLIGHT = 256  # runs in flight at each kill (the figure)
KILLS = 3
MODEL_CALLS = 2  # the calculator agent: model -> tool -> model
LEASE_SECONDS = "10"


# --- the model server and an agent on it ------------------------------------------------------


@pytest.fixture
def model_server() -> Iterator[Callable[[float], ModelServerProcess]]:
    """Start model servers with a fixed delay per answer; all stopped at the end."""
    started: list[ModelServerProcess] = []

    def start(delay: float) -> ModelServerProcess:
        server = ModelServerProcess(delay=delay)
        started.append(server)
        server.start()
        return server

    yield start
    for server in started:
        server.stop()


def calculator_agent(server: ModelServerProcess, slug: str = "calc") -> Agent:
    """An agent with the calculator tool on an OpenAI provider pointed at `server`."""
    provider = ModelProvider.objects.create(
        slug=f"{slug}-provider",
        name="Model server",
        kind=ModelProvider.Kind.OPENAI,
        base_url=server.base_url,
        timeout_seconds=120,
    )
    model = Model.objects.create(slug=f"{slug}-model", provider=provider, upstream_model="bench")
    return AgentFactory(slug=slug, model=model, tools=["calculator"])


def stats(server: ModelServerProcess) -> dict[str, Any]:
    return dict(server.stats())


def calls_per_key(server: ModelServerProcess) -> Counter[str]:
    return Counter(stats(server)["per_key"])


def in_flight(server: ModelServerProcess) -> int:
    return int(stats(server)["in_flight"])


@pytest.fixture
def many_in_flight_env(service_env: dict[str, str]) -> dict[str, str]:
    """Workers may call the model server on 127.0.0.1, with IN_FLIGHT runs at once."""
    service_env["AWAKEN_PROVIDERS_ALLOW_PRIVATE"] = "127.0.0.1,::1"
    service_env["AWAKEN_RUNS_IN_FLIGHT"] = str(IN_FLIGHT)
    # hundreds of runs on two cores: a lease longer than the pool's wait for a connection
    # (DB_POOL_TIMEOUT, 10 s), so that a renewal that waits for one is still in time
    # (conftest's 2 s is for a handful of runs); a killed worker's runs wait that long
    service_env["AWAKEN_LEASE_SECONDS"] = LEASE_SECONDS
    service_env["AWAKEN_SWEEP_SECONDS"] = "1"
    return service_env


@pytest.fixture
def workers(many_in_flight_env: dict[str, str], tmp_path: Path) -> Iterator[Callable[..., Proc]]:
    """Start `celery worker` processes for the runs' queue as the Procfile does: a threads
    pool whose size comes from the settings (AWAKEN_RUNS_IN_FLIGHT), not the command line.
    All are stopped at the end of the test."""
    started: list[Proc] = []

    def start(name: str, supervised: bool = False) -> Proc:
        args, ready = service_command("worker", name=name)
        for option in ("--pool", "--concurrency"):
            if option in args:
                at = args.index(option)
                del args[at : at + 2]
        args += ["--pool", "threads"]
        kind = SupervisedProc if supervised else Proc
        proc = kind(name, args, many_in_flight_env, tmp_path)
        started.append(proc)
        return wait_ready(proc, ready)

    yield start
    for proc in reversed(started):
        proc.stop()


# --- checks over many runs at once --------------------------------------------------------------


def unfinished(ids: list[Any]) -> int:
    return Run.objects.filter(pk__in=ids).exclude(status=Run.Status.DONE).count()


def wait_all_done(ids: list[Any], timeout: float, what: str, *logs: Proc) -> None:
    try:
        wait_for(lambda: unfinished(ids) == 0, timeout, what, interval=0.2)
    except AssertionError:
        states = Counter(
            Run.objects.filter(pk__in=ids).values_list("status", "status_reason", "recoveries")
        )
        tails = [proc.log_tail(2500) for proc in logs]
        raise AssertionError((what, states, *tails)) from None


def logs_of(ids: list[Any]) -> dict[Any, list[tuple[int, str, dict[str, Any]]]]:
    """Each run's events in one query: (seq, type, payload) in seq order."""
    rows = RunEvent.objects.filter(run_id__in=ids).order_by("run_id", "seq")
    logs: dict[Any, list[tuple[int, str, dict[str, Any]]]] = defaultdict(list)
    for run_id, seq, kind, payload in rows.values_list("run_id", "seq", "event_type", "payload"):
        logs[run_id].append((seq, kind, payload))
    return logs


def check_log(run: Run, log: list[tuple[int, str, dict[str, Any]]]) -> tuple[int, int]:
    """The run ended `natural_end` once, its log is gap-free and every activation is
    closed (an interrupted one by an `activation_interrupted` error). Returns (activations,
    interrupted activations)."""
    where = (
        run.pk,
        run.status_reason,
        run.error_payload,
        [kind if kind not in TERMINAL_EVENT_TYPES else (kind, payload) for _, kind, payload in log],
    )
    assert (run.status, run.status_reason) == ("done", "natural"), where
    seqs = [seq for seq, _, _ in log]
    assert seqs == list(range(1, len(seqs) + 1)) and run.last_event_seq == len(seqs), where
    activations: list[list[tuple[str, dict[str, Any]]]] = []
    for _, kind, payload in log:
        if kind == "run_start" or not activations:
            activations.append([])
        activations[-1].append((kind, payload))
    for activation in activations:
        # it starts with its run_start and ends with what closed it, nothing after that
        assert activation[0][0] == "run_start", where
        closes = [i for i, (kind, _) in enumerate(activation) if kind in TERMINAL_EVENT_TYPES]
        assert closes == [len(activation) - 1], where
    finishes = [payload for _, kind, payload in log if kind == "run_finish"]
    assert len(finishes) == 1 and log[-1][1] == "run_finish", where
    assert finishes[0]["termination"] == {"type": "natural_end"}, where
    interrupted = [
        payload
        for _, kind, payload in log
        if kind == "error" and payload.get("code") == ACTIVATION_INTERRUPTED
    ]
    return len(activations), len(interrupted)


def explain(run_id: Any, log: list[tuple[int, str, dict[str, Any]]], procs: list[Proc]) -> str:
    """What a failure message shows of a run: its events and its lines in the logs."""
    kinds = [f"{kind}:{payload['code']}" if "code" in payload else kind for _, kind, payload in log]
    lines = [line for proc in procs for line in proc.log().splitlines() if str(run_id) in line]
    return f"{run_id} {' '.join(kinds)} {lines[-10:]}"


LEASE_LOST = re.compile(r"run ([0-9a-f-]{36}): lease lost to another worker")


def leases_lost(procs: list[Proc]) -> Counter[str]:
    """Per run id, the segments that stopped because their lease had expired and another
    segment had taken the run (runs/services/execution.py logs each): a process too busy
    to renew a lease in time is treated as dead, and the run recovered like a killed one's
    (the step in progress is lost). Should be rare with a realistic lease."""
    return Counter(m.group(1) for proc in procs for m in LEASE_LOST.finditer(proc.log()))


def check_runs(
    ids: list[Any],
    keys: dict[Any, str],
    calls: Counter[str],
    procs: list[Proc],
    repeats: Callable[[Any, int, int], int],
    describe: Callable[[Any], Any] = lambda _: None,
) -> dict[str, int]:
    """`check_log` for every run, and its model calls: MODEL_CALLS, plus at most
    `repeats(run_id, activations, interrupted activations)` made again (the calls in
    progress when a worker died). Returns totals."""
    logs = logs_of(ids)
    totals: Counter[str] = Counter()
    over: list[Any] = []
    for run in Run.objects.filter(pk__in=ids):
        activations, interrupted = check_log(run, logs[run.pk])
        made = calls[keys[run.pk]]
        allowed = repeats(run.pk, activations, interrupted)
        if not MODEL_CALLS <= made <= MODEL_CALLS + allowed or interrupted > allowed:
            where = explain(run.pk, logs[run.pk], procs)
            over.append((made, allowed, interrupted, describe(run.pk), where))
        totals["runs"] += 1
        totals["activations"] += activations
        totals["interrupted"] += interrupted
        totals["excess_calls"] += made - MODEL_CALLS
    for line in over[:5]:
        print("over:", *line)
    assert not over, (len(over), dict(totals), over[:3])
    assert totals["runs"] == len(ids)
    return dict(totals)


def start_runs(agent: Agent, prefix: str, count: int, **options: Any) -> dict[Any, str]:
    """`count` runs of `agent`, each with its own first message (the model server's key)."""
    keys = {}
    for i in range(count):
        text = f"{prefix} {i}: what is 6*7?"
        keys[run_start(agent=agent, messages=text, **options).pk] = text
    return keys


# --- 1. SIGKILL with hundreds of runs in flight --------------------------------------------------


def held_by(proc: Proc, ids: list[Any]) -> set[Any]:
    """The unfinished runs whose lease names `proc` (runs/services/leases.py's
    `worker_identity`: host, process, thread), expired or not."""
    owner = f"{socket.gethostname()}:{proc.pid}:"
    held = Run.objects.filter(pk__in=ids, status="running", lease_owner__startswith=owner)
    return set(held.values_list("pk", flat=True))


def ownerless(ids: list[Any]) -> set[Any]:
    """Running runs with a lease but no owner: the sweep recovered them from a segment
    that had not renewed in time (owner cleared), and that segment, still going, renewed
    the lease (fenced by `attempt` only). Printed: each is a renewal that came too late."""
    rows = Run.objects.filter(pk__in=ids, status="running", lease_owner="")
    return set(rows.filter(lease_expires_at__isnull=False).values_list("pk", flat=True))


def wait_model_bound(
    server: ModelServerProcess, proc: Proc, ids: list[Any], share: float = 0.75
) -> None:
    """Wait until `proc` holds `share` of the unfinished runs, as many of them in a model
    call."""
    seen: list[tuple[int, int, int]] = []

    def bound() -> bool:
        held, left, calling = len(held_by(proc, ids)), unfinished(ids), in_flight(server)
        seen.append((held, left, calling))
        return held >= max(1, share * left) and calling >= share * held

    try:
        wait_for(bound, 90, "runs in flight in model calls", interval=0.1)
    except AssertionError:
        raise AssertionError(("(held, unfinished, in model calls)", seen[::10])) from None


def wait_answers(server: ModelServerProcess, count: int) -> None:
    """Wait until the model has answered `count` more calls."""
    first = stats(server)["answered"]
    wait_for(lambda: stats(server)["answered"] >= first + count, 90, "answers", interval=0.1)


@pytest.mark.timeout(220)
def test_a_worker_killed_three_times_with_hundreds_of_runs_in_flight_loses_nothing(
    processes, workers, model_server
):
    # for the first kills the model holds its answers back until (nearly) every run waits
    # on it; the last kill comes with a 1 s model
    server = model_server(60.0)
    keys = start_runs(calculator_agent(server), "kill", IN_FLIGHT)
    ids = list(keys)
    processes("beat")  # the sweep: expired leases are recovered
    procs: list[Proc] = []
    hit: Counter[Any] = Counter()  # per run, the kills that found it in flight
    held_at_kills: list[int] = []
    cut_at_kills: list[int] = []  # model calls whose connection the kill closed
    held_sets: list[set[Any]] = []
    orphans: list[set[Any]] = []  # diagnostics: see `ownerless`
    phases: list[Counter[str]] = []  # model calls per run so far, after each kill
    started = time.monotonic()
    marks: list[float] = []
    for kill in range(KILLS):
        procs.append(workers(f"worker{kill}"))
        marks.append(round(time.monotonic() - started, 1))
        if kill < KILLS - 1:  # every run waiting on its model
            wait_model_bound(server, procs[-1], ids, share=0.9)
        else:  # a 1 s model, half the first answers in: runs in every state (a model
            server.set_delay(1.0)  # call, a tool, a checkpoint being written, waiting)
            wait_answers(server, IN_FLIGHT // 2)
        before = stats(server)["disconnected_early"]
        procs[-1].kill()  # SIGKILL, the whole process group
        # in flight in the killed process (the only one): the runs its lease names, and
        # those whose owner the sweep cleared while their segment went on
        held = held_by(procs[-1], ids) | ownerless(ids)
        held_sets.append(held)
        orphans.append(ownerless(ids))
        hit.update(held)
        held_at_kills.append(len(held))
        wait_for(lambda: in_flight(server) == 0, 10, "the killed worker's model calls to drop")
        cut_at_kills.append(stats(server)["disconnected_early"] - before)
        phases.append(calls_per_key(server))
        marks.append(round(time.monotonic() - started, 1))
    procs.append(workers("survivor"))
    wait_all_done(ids, 120, "every run to finish", procs[-1])
    marks.append(round(time.monotonic() - started, 1))
    lost = leases_lost(procs)
    phases.append(calls_per_key(server))

    def describe(run_id: Any) -> Any:
        calls = [p[keys[run_id]] for p in phases]
        return calls, [run_id in h for h in held_sets], [run_id in o for o in orphans]

    print(
        f"kills: {held_at_kills} held, {cut_at_kills} cut, {[len(o) for o in orphans]} "
        f"ownerless; {lost.total()} leases lost; at {marks} s"
    )
    totals = check_runs(
        ids,
        keys,
        phases[-1],
        procs,
        lambda run_id, *_: hit[run_id] + lost[str(run_id)],
        describe,
    )
    print(totals)
    # a model call cut by a kill was made again; nothing else was
    assert sum(cut_at_kills) <= totals["excess_calls"] <= sum(held_at_kills) + lost.total(), (
        totals,
        held_at_kills,
        cut_at_kills,
        lost.total(),
    )
    # the kills did hit hundreds of runs in model calls: the test is not vacuous
    assert min(cut_at_kills[:-1]) >= 0.75 * IN_FLIGHT, cut_at_kills
    assert held_at_kills[-1] > 0 and totals["interrupted"] > 0, (held_at_kills, totals)


# --- 2. Redis restarted under load -----------------------------------------------------------------


@pytest.mark.timeout(200)
def test_redis_restarted_under_load_loses_no_run_and_the_worker_keeps_serving(
    processes, workers, model_server
):
    server = model_server(10.0)  # the restart comes while the runs wait on their model
    agent = calculator_agent(server)
    worker = workers("supervised", supervised=True)
    beat = processes("beat")
    before = start_runs(agent, "before", IN_FLIGHT // 2)
    wait_model_bound(server, worker, list(before))
    redis_restart()
    server.set_delay(1.0)
    after = start_runs(agent, "after", IN_FLIGHT // 4)  # the worker keeps taking runs
    keys = {**before, **after}
    ids = list(keys)
    wait_all_done(ids, 150, "every run to finish after the restart", worker, beat)
    # a worker that exits on Redis' loss (and is restarted by its supervisor) repeats at
    # most the step each of its activations was in
    restarts = getattr(worker, "restarts", 0)
    lost = leases_lost([worker])
    totals = check_runs(
        ids,
        keys,
        calls_per_key(server),
        [worker],
        lambda run_id, activations, _: activations - 1 + restarts + lost[str(run_id)],
    )
    print("worker restarts:", restarts, totals)


# --- 3. cancel of a run waiting on its model ---------------------------------------------------------


@pytest.mark.timeout(120)
def test_cancel_of_a_run_waiting_on_its_model_ends_it_and_closes_the_call_within_a_second(
    workers, model_server
):
    server = model_server(30.0)
    run = run_start(agent=calculator_agent(server), messages="cancel me: what is 6*7?")
    workers("worker")
    wait_for(lambda: in_flight(server) == 1, 30, "the model call")
    time.sleep(0.3)
    asked = time.monotonic()
    run_cancel(run=run)
    ended = closed = None
    while time.monotonic() - asked < 5 and (ended is None or closed is None):
        now = time.monotonic() - asked
        if ended is None and Run.objects.filter(pk=run.pk, status="done").exists():
            ended = now
        if closed is None and in_flight(server) == 0:
            closed = now
        time.sleep(0.01)
    final = stats(server)
    print("cancel: run ended after", ended, "s, model connection closed after", closed, "s")
    run.refresh_from_db()
    assert run.status_reason == "cancelled", (run.status, run.status_reason)
    assert ended is not None and ended < 1.0, ended
    # the model saw its connection closed: a real provider stops (and stops billing)
    assert closed is not None and closed < 1.0, (closed, final)
    assert (final["calls"], final["disconnected_early"]) == (1, 1), final
    seqs = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    kinds = list(
        RunEvent.objects.filter(run=run).order_by("seq").values_list("event_type", flat=True)
    )
    assert kinds[0] == "run_start" and kinds[-1] == "run_finish", kinds


# --- 4. priority at the limit -----------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_a_priority_zero_run_submitted_at_the_limit_starts_next(
    processes, workers, many_in_flight_env, model_server
):
    limit = 4
    many_in_flight_env["AWAKEN_RUNS_IN_FLIGHT"] = str(limit)
    server = model_server(4.0)  # a blocker holds its slot for two 4 s model calls
    workers("worker")
    processes("beat")
    blockers = list(start_runs(calculator_agent(server), "blocker", limit))
    wait_for(lambda: in_flight(server) == limit, 30, "every slot in a model call")
    quick = scripted_agent([{"text": "ok"}])
    low = list(start_runs(quick, "low", 20, priority=200))
    time.sleep(0.5)  # the low runs' tasks reach the worker, which has no room
    high = run_start(agent=quick, messages="urgent", priority=0)
    wait_all_done([high.pk], 60, "the urgent run")
    high.refresh_from_db()
    finished = Run.objects.filter(pk__in=blockers).values_list("finished_at", flat=True)
    first_free = min(at for at in finished if at is not None)
    low_runs = Run.objects.filter(pk__in=low, started_at__isnull=False)
    starts = sorted(low_runs.values_list("started_at", flat=True))
    timeline = (high.created_at, first_free, high.started_at, starts[:3])
    # the urgent run came while every slot was busy (else this test proves nothing)
    assert high.created_at < first_free, timeline
    # a process at its limit claims nothing more: the urgent run waited for a slot
    assert high.started_at >= first_free, timeline
    # and it took the first slot that freed, before the low runs queued earlier
    assert not any(at < high.started_at for at in starts), timeline
    wait_all_done(low + blockers, 90, "the other runs")
    assert stats(server)["max_in_flight"] <= limit
