"""Websocket fan-out on ONE daphne process in the distributed mode (PostgreSQL, a
private Redis, channels-redis).

1. Run stream: N = 500 websocket clients follow one run (`ws/runs/<id>/`) while the run
   gains 20 events/s for 10 s. This process plays the worker: each event is appended with
   `runs.services.events.events_append` in `transaction.atomic()` on the locked run, so
   the on-commit broadcast is the product's own. An on-commit hook registered before
   events_append's records the commit time; clients stamp receipt; latency = receipt -
   commit for every (client, event). Reported: clients connected, clients that got every
   event exactly once and in order within 20 s of the last commit, latency p50/p99,
   events per websocket frame, daphne's CPU, and the members left in the run's group
   once every client closed.
2. Dashboard: tabs on `ws/dashboard/?figures=1` (the dashboard page) while 10 runs/s
   finish (runs started beforehand, then cancelled with `run_cancel`, which commits their
   `run_finish`), in two rounds: 10 tabs, then 100. daphne pushes each tab every `run`
   message and, rendered once per process at most every FIGURES_EVERY_SECONDS while runs
   change (and once after the last change), the figures (`{"type": "figures"}`); a tab
   fetches nothing. Reported: p99 finish commit -> client of the `run` messages, the
   `figures` messages per tab (against one per FIGURES_EVERY_SECONDS of activity plus
   one, not one per finish) and whether each tab's last one came after its last finish,
   and the SQL statements daphne ran per finished run in each round (counted inside
   daphne: rendering the figures is its only database work then), which should not
   depend on the number of tabs.

The clients are one asyncio process (bench/ws_clients.py, started as this module with
`--clients`), like a crowd of browser tabs; it does not load Django. daphne runs with its
access log off, as in the Procfile, under a small launcher that counts its SQL statements
(see DAPHNE_LAUNCHER in bench/ws_daphne.py).

Run: .venv/bin/python -m bench.ws_fanout   (database awaken_bench_ws, dropped and recreated)
Knobs: BENCH_WS_CLIENTS, BENCH_WS_RATE, BENCH_WS_SECONDS, BENCH_WS_DASHBOARDS,
BENCH_WS_FINISH_RATE, BENCH_WS_FINISH_SECONDS.

Django and the application are imported inside functions only: they need django.setup(),
which runs after the environment is set (see bench/common.py).
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import common, fixtures
from bench.common import BenchEnv, BenchError, Figure, percentile
from bench.ws_clients import run_clients
from bench.ws_daphne import Daphne, collect, login_cookie, paced, spawn_clients, start_daphne

BENCHMARK = "ws_fanout"
DATABASE_URL = f"postgres://postgres@{common.HOST}:5432/awaken_bench_ws"
CLIENTS = int(os.environ.get("BENCH_WS_CLIENTS", "500"))
RATE = float(os.environ.get("BENCH_WS_RATE", "20"))
SECONDS = float(os.environ.get("BENCH_WS_SECONDS", "10"))
DASHBOARDS = int(os.environ.get("BENCH_WS_DASHBOARDS", "100"))
FINISH_RATE = float(os.environ.get("BENCH_WS_FINISH_RATE", "10"))
FINISH_SECONDS = float(os.environ.get("BENCH_WS_FINISH_SECONDS", "10"))
GRACE_SECONDS = 20.0  # after the last commit, for the last frames to arrive
GOAL_P99_MS = 100.0
PAD = "x" * 200  # a realistic event payload (~300 bytes)
FEW_DASHBOARDS = 10  # the first dashboard round, against which DASHBOARDS is compared
# a dashboard tab stops this long after its last message once it has every finish: the
# last figures come at most FIGURES_EVERY_SECONDS (plus a render) after the last change
FIGURES_MARGIN = 1.5


def figure(
    name: str, value: float, unit: str, target: float, goal: str, met: bool | None
) -> Figure:
    """A figure beside its target (these goals are absolute, not ratios to a baseline)."""
    ratio = value / target if target else float("nan")
    return Figure(BENCHMARK, name, value, unit, "target", target, unit, ratio, goal, met)


# --- 1. one run's stream -------------------------------------------------------------------


@dataclass
class Stream:
    """What the run's clients got: deliveries matched to their commits."""

    connected: int
    complete: int  # clients with every event once, in order, in time
    frames: int
    delivered: int  # events, over all clients
    latencies: list[float]  # commit -> client, ms, every delivery

    @classmethod
    def of(cls, result: dict[str, Any], committed: dict[int, int]) -> Stream:
        last_commit = max(committed.values())
        expected = sorted(committed)
        latencies: list[float] = []
        complete = frames = 0
        for tab in result["tabs"]:
            frames += tab["frames"]
            in_time = [
                (seq, at) for seq, at in tab["received"] if at <= last_commit + GRACE_SECONDS * 1e9
            ]
            if [seq for seq, _ in in_time] == expected:  # each once, in order, none missing
                complete += 1
            latencies += [
                (at - committed[seq]) / 1e6 for seq, at in tab["received"] if seq in committed
            ]
        delivered = sum(len(tab["received"]) for tab in result["tabs"])
        return cls(len(result["tabs"]), complete, frames, delivered, latencies)


def run_stream(env: BenchEnv, daphne: Daphne, cookie: str) -> list[Figure]:
    from runs.models import Run

    common.print_header(f"ws_fanout 1: {CLIENTS} websockets on one run, {RATE:.0f} events/s")
    agent = fixtures.create_agent([], tools=[])
    thread = fixtures.create_thread(0)
    run, _ = fixtures.create_claimed_run(agent, thread, fixtures.append_user_message(thread, "go"))
    after = Run.objects.values_list("last_event_seq", flat=True).get(pk=run.pk)
    count = int(RATE * SECONDS)
    proc, out = spawn_clients(
        env,
        "run-clients",
        {
            "mode": "run",
            "url": f"ws://{common.HOST}:{daphne.port}/ws/runs/{run.pk}/?after_seq={after}",
            "cookie": cookie,
            "origin": f"http://{common.HOST}:{daphne.port}",
            "clients": CLIENTS,
            "count": count,
            "follow_seconds": SECONDS + GRACE_SECONDS,
        },
    )
    cpu_before, wall_before = daphne.cpu(), time.monotonic()
    committed, late = emit_events(run.pk, count)
    result = collect(env, proc, out, GRACE_SECONDS + 60)
    cpu = daphne.cpu() - cpu_before
    wall = time.monotonic() - wall_before
    members_left = group_members_left(env, run.pk)
    stream = Stream.of(result, committed)
    p50, p99 = percentile(stream.latencies, 50), percentile(stream.latencies, 99)
    print(
        f"  connected {stream.connected}/{CLIENTS} in {result['connect_seconds']:.1f}s"
        f" (errors: {result['errors'][:3]})\n"
        f"  {count} events committed ({late} behind schedule); clients with every event once"
        f" in order within {GRACE_SECONDS:.0f}s of the last commit: {stream.complete}/{CLIENTS}\n"
        f"  commit -> client p50 {p50:.1f} ms, p99 {p99:.1f} ms,"
        f" max {max(stream.latencies, default=float('nan')):.1f} ms over"
        f" {len(stream.latencies)} deliveries\n"
        f"  {stream.frames} websocket frames for {stream.delivered} events"
        f" ({stream.delivered / max(stream.frames, 1):.2f} events per frame)\n"
        f"  daphne CPU {cpu:.2f} s over {wall:.1f} s ({100 * cpu / wall:.0f}% of a core);"
        f" the clients' process {100 * result['cpu_share']:.0f}% of a core;"
        f" load {common.fmt_load(os.getloadavg())}\n"
        f"  members of the run's group after every client closed: {members_left}",
        flush=True,
    )
    return stream_figures(stream, p50, p99, 100 * cpu / wall, members_left)


def emit_events(run_id: Any, count: int) -> tuple[dict[int, int], int]:
    """`count` events on the run at RATE, each committed as a worker does; returns each
    seq's commit time (ns) and how many went out behind schedule."""
    from django.db import transaction

    from runs.models import Run
    from runs.services.events import events_append

    committed: dict[int, int] = {}

    def emit(index: int) -> None:
        stamp: list[int] = []
        with transaction.atomic():
            locked = Run.objects.select_for_update().get(pk=run_id)
            # registered before events_append's broadcast: runs right after COMMIT
            transaction.on_commit(lambda: stamp.append(time.time_ns()))
            rows = events_append(
                locked,
                [
                    {
                        "event_type": "activity_snapshot",
                        "activity_type": "bench",
                        "content": {"index": index, "pad": PAD},
                    }
                ],
            )
        committed[rows[0].seq] = stamp[0]

    late = paced(count, RATE, emit)
    return committed, late


def group_members_left(env: BenchEnv, run_id: Any) -> int:
    """Members of the run's channel-layer group, waited for (10 s) to drop to 0."""
    from runs.realtime import run_group

    members_left = -1
    key = f"asgi:group:{run_group(run_id)}"
    redis = env.redis()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        members_left = int(redis.zcard(key))
        if members_left == 0:
            break
        time.sleep(0.1)
    return members_left


def stream_figures(
    stream: Stream, p50: float, p99: float, cpu_share: float, members_left: int
) -> list[Figure]:
    nan = float("nan")
    connected, complete = stream.connected, stream.complete
    return [
        figure("clients connected", connected, "", CLIENTS, "all", connected == CLIENTS),
        figure(
            "clients with every event",
            complete,
            "",
            CLIENTS,
            "all, once, in order",
            complete == CLIENTS,
        ),
        figure("p50 commit->client", p50, "ms", nan, "context", None),
        figure(
            "p99 commit->client",
            p99,
            "ms",
            GOAL_P99_MS,
            f"< {GOAL_P99_MS:.0f} ms",
            p99 < GOAL_P99_MS,
        ),
        figure("daphne CPU", cpu_share, "% core", nan, "context", None),
        figure("group members left", members_left, "", 0, "0", members_left == 0),
    ]


# --- 2. dashboards ------------------------------------------------------------------------------


def dashboards(env: BenchEnv, daphne: Daphne, cookie: str) -> list[Figure]:
    from runs.consumers import FIGURES_EVERY_SECONDS
    from runs.services.submission_flow import run_start

    every = FIGURES_EVERY_SECONDS
    common.print_header(
        f"ws_fanout 2: {FEW_DASHBOARDS}, then {DASHBOARDS} dashboards while"
        f" {FINISH_RATE:.0f} runs/s finish"
    )
    agent = fixtures.create_agent([{"text": "never runs"}], tools=[])
    count = int(FINISH_RATE * FINISH_SECONDS)
    config = {
        "mode": "dashboard",
        "url": f"ws://{common.HOST}:{daphne.port}/ws/dashboard/?figures=1",
        "cookie": cookie,
        "origin": f"http://{common.HOST}:{daphne.port}",
        "count": count,
        "follow_seconds": FINISH_SECONDS + GRACE_SECONDS,
        "quiet": every + FIGURES_MARGIN,
    }
    rounds = []
    for tabs in (FEW_DASHBOARDS, DASHBOARDS):
        # started beforehand (no worker runs them): each round finishes its own
        runs = [run_start(agent=agent, messages=f"run {i}") for i in range(count)]
        print(f"  {tabs} tabs:", flush=True)
        rounds.append(dashboard_round(env, daphne, {**config, "clients": tabs}, runs, every))
    few, many = rounds
    print(
        f"  SQL statements daphne ran (rendering the figures): {few['statements']} with"
        f" {FEW_DASHBOARDS} tabs, {many['statements']} with {DASHBOARDS} tabs:"
        f" {few['statements'] / count:.2f} and {many['statements'] / count:.2f} per finished"
        f" run, {few['per_render']:.1f} and {many['per_render']:.1f} per render"
        f" ({few['renders']} and {many['renders']} renders)",
        flush=True,
    )
    return dashboard_figures(few, many, count, every)


def dashboard_figures(
    few: dict[str, Any], many: dict[str, Any], count: int, every: float
) -> list[Figure]:
    """The round with many tabs against the goals; its SQL against the round with few."""
    # the rounds' renders may differ by one (where the 2.5 s ticks fall): that is the noise
    noise = max(few["per_render"], many["per_render"])
    same_sql = abs(many["statements"] - few["statements"]) <= noise
    nan = float("nan")
    return [
        figure(
            "dashboards: p99 finish->client",
            many["p99"],
            "ms",
            GOAL_P99_MS,
            f"< {GOAL_P99_MS:.0f} ms",
            many["p99"] < GOAL_P99_MS,
        ),
        figure(
            "dashboards with every finish",
            many["complete"],
            "",
            DASHBOARDS,
            "all",
            many["complete"] == DASHBOARDS,
        ),
        figure(
            "figures messages per tab",
            many["figures_per_tab"],
            "",
            many["expected"],
            f"1 per {every:g} s of activity + 1, every tab",
            many["figures_ok"] == DASHBOARDS,
        ),
        figure(
            "tabs shown the last change",
            many["shown_last"],
            "",
            DASHBOARDS,
            "all: figures after the last finish",
            many["shown_last"] == DASHBOARDS,
        ),
        figure(
            f"SQL per finished run, {DASHBOARDS} tabs",
            many["statements"] / count,
            "statements",
            few["statements"] / count,
            f"= {FEW_DASHBOARDS} tabs' (within one render)",
            same_sql,
        ),
        figure("SQL per render", many["per_render"], "statements", nan, "context", None),
    ]


def finish_paced(runs: list[Any]) -> tuple[dict[str, int], int]:
    """Cancel the runs at FINISH_RATE, each in its own transaction; returns each run's
    commit time (ns, stamped before the broadcast) and how many started late."""
    from django.db import transaction

    from runs.models import Run
    from runs.services.runs import run_cancel

    finished: dict[str, int] = {}

    def finish(index: int) -> None:
        stamp: list[int] = []
        with transaction.atomic():
            transaction.on_commit(lambda: stamp.append(time.time_ns()))  # before the broadcast
            run_cancel(run=Run.objects.get(pk=runs[index].pk))
        finished[str(runs[index].pk)] = stamp[0]

    late = paced(len(runs), FINISH_RATE, finish)
    return finished, late


def dashboard_tally(tabs: list[dict[str, Any]], finished: dict[str, int], every: float) -> Any:
    """What the tabs received against the finish commits: latencies, tabs that saw every
    finish, and the figures messages against one per `every` seconds of activity plus one."""
    latencies = [
        (at - finished[run_id]) / 1e6
        for tab in tabs
        for run_id, at in tab["finished"]
        if run_id in finished
    ]
    # renders at the first change, then every `every` seconds while changes come: the last
    # one at the first tick after the last change
    activity = (max(finished.values()) - min(finished.values())) / 1e9
    expected = math.ceil(activity / every) + 1
    counts = [len(tab["figures"]) for tab in tabs]
    return SimpleNamespace(
        latencies=latencies,
        complete=sum(1 for tab in tabs if len(tab["finished"]) == len(finished)),
        p99=percentile(latencies, 99),
        activity=activity,
        expected=expected,
        counts=counts,
        figures_ok=sum(1 for n in counts if abs(n - expected) <= 1),
        shown_last=sum(
            1 for tab in tabs if tab["figures"] and tab["figures"][-1][0] > tab["last_run"]
        ),
        lags=[(tab["figures"][-1][0] - tab["last_run"]) / 1e9 for tab in tabs if tab["figures"]],
        sizes=[size for tab in tabs for _, size in tab["figures"]],
        renders=max(counts, default=0),  # each render reaches every tab of the process
        messages=sum(tab["frames"] for tab in tabs),
    )


def dashboard_round(
    env: BenchEnv, daphne: Daphne, config: dict[str, Any], runs: list[Any], every: float
) -> dict[str, Any]:
    proc, out = spawn_clients(env, f"dashboard-{config['clients']}", config)
    statements_before, cpu_before = daphne.statements(), daphne.cpu()
    started = time.monotonic()
    finished, late = finish_paced(runs)
    result = collect(env, proc, out, FINISH_SECONDS + GRACE_SECONDS + 60)
    statements = daphne.statements() - statements_before
    cpu, wall = daphne.cpu() - cpu_before, time.monotonic() - started
    tabs = result["tabs"]
    t = dashboard_tally(tabs, finished, every)
    print(
        f"    connected {len(tabs)}/{config['clients']}; {len(runs)} runs finished over"
        f" {t.activity:.1f} s ({late} behind schedule); tabs that saw every finish:"
        f" {t.complete} (errors: {result['errors'][:3]})\n"
        f"    finish commit -> dashboard p50 {percentile(t.latencies, 50):.1f} ms,"
        f" p99 {t.p99:.1f} ms over {len(t.latencies)} deliveries\n"
        f"    figures messages per tab: {min(t.counts, default=0)}-{max(t.counts, default=0)}"
        f" (expected {t.expected}: one per {every:g} s of activity plus one), {sum(t.counts)}"
        f" in all for {t.messages} run messages; each ~{statistics.fmean(t.sizes or [0]):.0f}"
        f" characters of HTML; the last one after the tab's last finish in"
        f" {t.shown_last}/{len(tabs)} tabs, {min(t.lags, default=float('nan')):.2f}-"
        f"{max(t.lags, default=float('nan')):.2f} s after it\n"
        f"    daphne ran {statements} SQL statements ({statements / max(t.renders, 1):.1f} per"
        f" render); daphne CPU {cpu:.2f} s over {wall:.1f} s ({100 * cpu / wall:.0f}% of a"
        f" core); the clients' process {100 * result['cpu_share']:.0f}% of a core;"
        f" load {common.fmt_load(os.getloadavg())}",
        flush=True,
    )
    return {
        "p99": t.p99,
        "complete": t.complete,
        "statements": statements,
        "renders": t.renders,
        "per_render": statements / max(t.renders, 1),
        "expected": t.expected,
        "figures_per_tab": statistics.fmean(t.counts or [0]),
        "figures_ok": t.figures_ok,
        "shown_last": t.shown_last,
    }


def run(env: BenchEnv) -> list[Figure]:
    daphne = start_daphne(env)
    try:
        cookie = login_cookie()
        figures = run_stream(env, daphne, cookie)
        figures += dashboards(env, daphne, cookie)
        if not daphne.proc.alive():
            raise BenchError(f"daphne died:\n{daphne.proc.log_tail()}")
    finally:
        env.stop(daphne.proc)
    common.print_figures(figures)
    return figures


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--clients":  # the clients' child process
        run_clients(Path(sys.argv[2]))
        return
    os.environ.setdefault("BENCH_DATABASE_URL", DATABASE_URL)
    common.standalone(run)


if __name__ == "__main__":
    main()
