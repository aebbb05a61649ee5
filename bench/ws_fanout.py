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
2. Dashboard: 100 clients on `ws/dashboard/` while 10 runs/s finish (runs started
   beforehand, then cancelled with `run_cancel`, which commits their `run_finish`), in
   two rounds. Round 1, push only: the clients just listen. Round 2: each client also
   refetches the stats partial as the dashboard JS does (at most once per 2.5 s, 0.4 s
   plus up to 1 s of jitter after the first change, always once after the last one).
   Reported: p99 commit -> client of each finish in both rounds, the stats fetches
   (against one per message per tab, the old policy), and the SQL statements daphne ran
   during round 2 (counted inside daphne: the pages' requests are its only database
   work then) per finished run.

The clients are one asyncio process (this module with `--clients`), like a crowd of
browser tabs; it does not load Django. daphne runs with its access log off, as in the
Procfile, under a small launcher that counts its SQL statements (see DAPHNE_LAUNCHER).

Run: .venv/bin/python -m bench.ws_fanout   (database awaken_bench_ws, dropped and recreated)
Knobs: BENCH_WS_CLIENTS, BENCH_WS_RATE, BENCH_WS_SECONDS, BENCH_WS_DASHBOARDS,
BENCH_WS_FINISH_RATE, BENCH_WS_FINISH_SECONDS.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import re
import signal
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import common, proctree
from bench.common import BenchEnv, BenchError, Figure, percentile

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
HANDSHAKES_AT_ONCE = 50  # daphne's listen backlog is 50
# the dashboard JS (static/js/run_stream.js): PANEL_REFRESH_MS, _DELAY_MS, _JITTER_MS
REFRESH_EVERY = 2.5
REFRESH_DELAY = 0.4
REFRESH_JITTER = 1.0

# daphne as in production, plus a count of the SQL statements it runs, written to
# BENCH_STATEMENTS_FILE on SIGUSR1. Application code is unchanged.
DAPHNE_LAUNCHER = r"""
import os, signal, sys
import django
django.setup()
from django.db.backends.signals import connection_created
statements = [0]
def count(execute, sql, params, many, context):
    statements[0] += 1
    return execute(sql, params, many, context)
def hook(sender, connection, **kwargs):
    if count not in connection.execute_wrappers:
        connection.execute_wrappers.append(count)
connection_created.connect(hook)
def report(signum, frame):
    with open(os.environ["BENCH_STATEMENTS_FILE"] + ".tmp", "w") as out:
        out.write(str(statements[0]))
    os.replace(os.environ["BENCH_STATEMENTS_FILE"] + ".tmp", os.environ["BENCH_STATEMENTS_FILE"])
signal.signal(signal.SIGUSR1, report)
from daphne.cli import CommandLineInterface
CommandLineInterface().run(sys.argv[1:])
"""


# --- the clients (child process, no Django) --------------------------------------------------

# event keys only: the rows' HTML has its quotes escaped. Frames are matched as bytes
# (recv(decode=False)): decoding 10,000 frames a second costs the clients' process CPU.
SEQ = re.compile(rb'"seq": (\d+)')


class Tab:
    """One browser tab: a websocket, what it received, and for dashboards its throttled
    refetches of the stats partial."""

    def __init__(self) -> None:
        self.socket: Any = None
        self.error = ""
        self.received: list[list[int]] = []  # [seq, receipt ns]
        self.finished: list[tuple[str, int]] = []  # dashboards: [run id, receipt ns]
        self.frames = 0
        self.fetches: list[list[Any]] = []  # dashboards: [start (monotonic), seconds, status]
        self._last_fetch = float("-inf")
        self._planned: asyncio.Task[None] | None = None

    def wants_refresh(self, fetch: Any) -> None:
        """The dashboard JS's throttle (static/js/run_stream.js)."""
        if self._planned is not None:
            return
        first = REFRESH_DELAY + random.random() * REFRESH_JITTER
        wait = max(first, self._last_fetch + REFRESH_EVERY - time.monotonic())
        self._planned = asyncio.create_task(self._refresh_later(wait, fetch))

    async def _refresh_later(self, wait: float, fetch: Any) -> None:
        await asyncio.sleep(wait)
        self._planned = None
        self._last_fetch = started = time.monotonic()
        try:
            status = (await fetch()).status_code
        except Exception as exc:
            status = type(exc).__name__
        self.fetches.append([started, time.monotonic() - started, status])

    async def refresh_done(self) -> None:
        while self._planned is not None:
            await asyncio.sleep(0.05)


async def _open(tab: Tab, url: str, headers: dict[str, str], gate: asyncio.Semaphore) -> None:
    import websockets

    async with gate:
        try:
            tab.socket = await websockets.connect(
                url, additional_headers=headers, max_queue=None, open_timeout=60
            )
            while True:  # the replay (none: we connect after the last seq), then `ready`
                raw = await asyncio.wait_for(tab.socket.recv(), 60)
                if raw.startswith('{"type": "ready"'):
                    return
        except Exception as exc:
            tab.error = repr(exc)[:300]


async def _follow_run(tab: Tab, count: int, deadline: float) -> None:
    seen: set[int] = set()
    try:
        async with asyncio.timeout(deadline - time.time()):  # one timer, not one per frame
            while len(seen) < count:
                raw = await tab.socket.recv(decode=False)
                received = time.time_ns()
                if not raw.startswith(b'{"type": "event'):
                    continue
                tab.frames += 1
                for seq in map(int, SEQ.findall(raw)):
                    tab.received.append([seq, received])
                    seen.add(seq)
    except Exception:  # the deadline, or the socket closed
        return


async def _follow_dashboard(tab: Tab, count: int, deadline: float, fetch: Any) -> None:
    try:
        async with asyncio.timeout(deadline - time.time()):
            while len(tab.finished) < count:
                raw = await tab.socket.recv(decode=False)
                received = time.time_ns()
                message = json.loads(raw)
                if message.get("type") != "run":
                    continue
                tab.frames += 1
                if fetch is not None:
                    tab.wants_refresh(fetch)
                if message["run"].get("status") == "done":
                    tab.finished.append((message["run"]["id"], received))
    except Exception:  # the deadline, or the socket closed
        return


async def clients_main(config: dict[str, Any]) -> dict[str, Any]:
    import httpx

    headers = {"Cookie": config["cookie"], "Origin": config["origin"]}
    tabs = [Tab() for _ in range(config["clients"])]
    gate = asyncio.Semaphore(HANDSHAKES_AT_ONCE)
    started = time.monotonic()
    await asyncio.gather(*(_open(tab, config["url"], headers, gate) for tab in tabs))
    connect_seconds = time.monotonic() - started
    live = [tab for tab in tabs if tab.socket is not None and not tab.error]
    print(f"READY {len(live)} {len(tabs) - len(live)}", flush=True)
    cpu_started, wall_started = time.process_time(), time.monotonic()
    deadline = time.time() + config["follow_seconds"]
    http = httpx.AsyncClient(
        base_url=config["origin"],
        headers={"Cookie": config["cookie"], "HX-Request": "true"},
        limits=httpx.Limits(max_connections=len(tabs)),
        timeout=30,
    )
    try:
        if config["mode"] == "run":
            await asyncio.gather(*(_follow_run(tab, config["count"], deadline) for tab in live))
        else:

            def get_stats() -> Any:
                return http.get(config["stats_path"])

            fetch = get_stats if config["refetch"] else None
            await asyncio.gather(
                *(_follow_dashboard(tab, config["count"], deadline, fetch) for tab in live)
            )
            await asyncio.wait_for(asyncio.gather(*(tab.refresh_done() for tab in live)), 30)
    finally:
        await http.aclose()
        await asyncio.gather(
            *(tab.socket.close() for tab in tabs if tab.socket is not None),
            return_exceptions=True,
        )
    return {
        "cpu_share": (time.process_time() - cpu_started) / (time.monotonic() - wall_started),
        "connect_seconds": connect_seconds,
        "errors": [tab.error for tab in tabs if tab.error],
        "tabs": [
            {
                "received": tab.received,
                "finished": tab.finished,
                "frames": tab.frames,
                "fetches": tab.fetches,
            }
            for tab in live
        ],
    }


# --- the driver ------------------------------------------------------------------------------


@dataclass
class Daphne:
    proc: Any
    port: int
    statements_file: Path

    def statements(self) -> int:
        """SQL statements daphne has run so far (asked for with SIGUSR1)."""
        self.statements_file.unlink(missing_ok=True)
        os.kill(self.proc.pid, signal.SIGUSR1)
        common.wait_for(self.statements_file.exists, 10, "daphne's statement count")
        return int(self.statements_file.read_text())

    def cpu(self) -> float:
        return proctree.cpu_seconds([self.proc.pid])


def start_daphne(env: BenchEnv) -> Daphne:
    port = common.free_port()
    statements_file = env.log_dir / "daphne-statements"
    proc = env.spawn(
        "daphne",
        [
            common.PYTHON,
            "-c",
            DAPHNE_LAUNCHER,
            "--verbosity",
            "0",
            "-b",
            common.HOST,
            "-p",
            str(port),
            "awaken_site.asgi:application",
        ],
        env={"BENCH_STATEMENTS_FILE": str(statements_file)},
        ready=lambda p: common.port_open(port),
        timeout=40,
    )
    return Daphne(proc, port, statements_file)


def spawn_clients(env: BenchEnv, name: str, config: dict[str, Any]) -> tuple[Any, Path]:
    config_path = env.log_dir / f"{name}.config.json"
    out = env.log_dir / f"{name}.json"
    config_path.write_text(json.dumps({**config, "out": str(out)}))
    proc = env.spawn(
        name,
        [common.PYTHON, "-m", "bench.ws_fanout", "--clients", str(config_path)],
        ready=lambda p: "READY" in p.log_tail(300),
        timeout=120,
    )
    ok, failed = re.search(r"READY (\d+) (\d+)", proc.log()).groups()  # type: ignore[union-attr]
    print(f"  {name}: {ok} clients connected, {failed} failed", flush=True)
    return proc, out


def collect(env: BenchEnv, proc: Any, out: Path, timeout: float) -> dict[str, Any]:
    common.wait_for(lambda: not proc.alive(), timeout, f"{proc.name} to finish", 0.1)
    env.stop(proc)
    if not out.exists():
        raise BenchError(f"{proc.name} wrote no results:\n{proc.log_tail()}")
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def login_cookie() -> str:
    from django.contrib.auth.models import User
    from django.test import Client

    user = User.objects.create_superuser(f"bench-watcher-{uuid.uuid4().hex[:6]}", password=None)
    browser = Client()
    browser.force_login(user)
    return f"sessionid={browser.cookies['sessionid'].value}"


def paced(count: int, rate: float, emit: Any) -> int:
    """emit(i) at `rate` per second; returns how many started over an interval late."""
    interval, late = 1.0 / rate, 0
    start = time.monotonic()
    for index in range(count):
        delay = start + index * interval - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        elif delay < -interval:
            late += 1
        emit(index)
    return late


def figure(
    name: str, value: float, unit: str, target: float, goal: str, met: bool | None
) -> Figure:
    """A figure beside its target (these goals are absolute, not ratios to a baseline)."""
    ratio = value / target if target else float("nan")
    return Figure(BENCHMARK, name, value, unit, "target", target, unit, ratio, goal, met)


def run_stream(env: BenchEnv, daphne: Daphne, cookie: str) -> list[Figure]:
    from django.db import transaction

    from runs.models import Run
    from runs.realtime import run_group
    from runs.services.events import events_append

    common.print_header(f"ws_fanout 1: {CLIENTS} websockets on one run, {RATE:.0f} events/s")
    agent = common.create_agent([], tools=[])
    thread = common.create_thread(0)
    run, _ = common.create_claimed_run(agent, thread, common.append_user_message(thread, "go"))
    after = Run.objects.values_list("last_event_seq", flat=True).get(pk=run.pk)
    count = int(RATE * SECONDS)
    origin = f"http://{common.HOST}:{daphne.port}"
    proc, out = spawn_clients(
        env,
        "run-clients",
        {
            "mode": "run",
            "url": f"ws://{common.HOST}:{daphne.port}/ws/runs/{run.pk}/?after_seq={after}",
            "cookie": cookie,
            "origin": origin,
            "clients": CLIENTS,
            "count": count,
            "follow_seconds": SECONDS + GRACE_SECONDS,
        },
    )
    committed: dict[int, int] = {}

    def emit(index: int) -> None:
        stamp: list[int] = []
        with transaction.atomic():
            locked = Run.objects.select_for_update().get(pk=run.pk)
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

    cpu_before, wall_before = daphne.cpu(), time.monotonic()
    late = paced(count, RATE, emit)
    result = collect(env, proc, out, GRACE_SECONDS + 60)
    cpu = daphne.cpu() - cpu_before
    wall = time.monotonic() - wall_before

    members_left = -1
    key = f"asgi:group:{run_group(run.pk)}"
    redis = env.redis()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        members_left = int(redis.zcard(key))
        if members_left == 0:
            break
        time.sleep(0.1)

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
    connected = len(result["tabs"])
    p50, p99 = percentile(latencies, 50), percentile(latencies, 99)
    events_delivered = sum(len(tab["received"]) for tab in result["tabs"])
    print(
        f"  connected {connected}/{CLIENTS} in {result['connect_seconds']:.1f}s"
        f" (errors: {result['errors'][:3]})\n"
        f"  {count} events committed ({late} behind schedule); clients with every event once"
        f" in order within {GRACE_SECONDS:.0f}s of the last commit: {complete}/{CLIENTS}\n"
        f"  commit -> client p50 {p50:.1f} ms, p99 {p99:.1f} ms,"
        f" max {max(latencies, default=float('nan')):.1f} ms over {len(latencies)} deliveries\n"
        f"  {frames} websocket frames for {events_delivered} events"
        f" ({events_delivered / max(frames, 1):.2f} events per frame)\n"
        f"  daphne CPU {cpu:.2f} s over {wall:.1f} s ({100 * cpu / wall:.0f}% of a core);"
        f" the clients' process {100 * result['cpu_share']:.0f}% of a core;"
        f" load {common.fmt_load(os.getloadavg())}\n"
        f"  members of the run's group after every client closed: {members_left}",
        flush=True,
    )
    nan = float("nan")
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
        figure("daphne CPU", 100 * cpu / wall, "% core", nan, "context", None),
        figure("group members left", members_left, "", 0, "0", members_left == 0),
    ]


def dashboards(env: BenchEnv, daphne: Daphne, cookie: str) -> list[Figure]:
    from django.urls import reverse

    from runs.services.runs import run_start

    common.print_header(
        f"ws_fanout 2: {DASHBOARDS} dashboards while {FINISH_RATE:.0f} runs/s finish"
    )
    agent = common.create_agent([{"text": "never runs"}], tools=[])
    count = int(FINISH_RATE * FINISH_SECONDS)
    # started beforehand (no worker runs them): each round finishes its own
    rounds = {
        refetch: [run_start(agent=agent, messages=f"run {i}") for i in range(count)]
        for refetch in (False, True)
    }
    config = {
        "mode": "dashboard",
        "url": f"ws://{common.HOST}:{daphne.port}/ws/dashboard/",
        "cookie": cookie,
        "origin": f"http://{common.HOST}:{daphne.port}",
        "clients": DASHBOARDS,
        "count": count,
        "follow_seconds": FINISH_SECONDS + GRACE_SECONDS,
        "stats_path": reverse("runs:dashboard-stats"),
    }
    print("  round 1, push only (the clients do not refetch the stats):", flush=True)
    push = dashboard_round(env, daphne, {**config, "refetch": False}, rounds[False])
    print("  round 2, each client refetches the stats as the dashboard JS does:", flush=True)
    pages = dashboard_round(env, daphne, {**config, "refetch": True}, rounds[True])

    fetches = [fetch for tab in pages["tabs"] for fetch in tab["fetches"]]
    failed = [status for _, _, status in fetches if status != 200]
    gaps = [
        later[0] - earlier[0]
        for tab in pages["tabs"]
        for earlier, later in itertools.pairwise(tab["fetches"])
    ]
    durations = [seconds for _, seconds, _ in fetches]
    statements = pages["statements"]
    print(
        f"  {pages['messages']} dashboard messages reached the tabs: refetching on each would"
        f" be {pages['messages']} stats requests; the throttle made {len(fetches)}"
        f" ({len(fetches) / DASHBOARDS:.1f} per tab, {len(failed)} failed"
        f"{': ' + str(sorted(set(map(str, failed)))) if failed else ''}),"
        f" at least {min(gaps, default=float('nan')):.2f} s apart in a tab; each took"
        f" p50 {1000 * percentile(durations, 50):.0f} / p99"
        f" {1000 * percentile(durations, 99):.0f} ms\n"
        f"  daphne ran {statements} SQL statements in round 2:"
        f" {statements / count:.1f} per finished run,"
        f" {statements / max(len(fetches), 1):.1f} per stats request"
        f" (round 1, push only: {push['statements']}); refetching on each message would"
        f" be ~{pages['messages'] * statements / max(len(fetches), 1) / count:.0f} per"
        f" finished run at that rate per request",
        flush=True,
    )
    nan = float("nan")
    return [
        figure("dashboards, push only: p99", push["p99"], "ms", GOAL_P99_MS, "context", None),
        figure(
            "dashboards: p99 finish->client",
            pages["p99"],
            "ms",
            GOAL_P99_MS,
            f"< {GOAL_P99_MS:.0f} ms",
            pages["p99"] < GOAL_P99_MS,
        ),
        figure(
            "dashboards with every finish",
            pages["complete"],
            "",
            DASHBOARDS,
            "all",
            pages["complete"] == DASHBOARDS,
        ),
        figure(
            "stats fetches per tab",
            len(fetches) / DASHBOARDS,
            "",
            FINISH_SECONDS / REFRESH_EVERY + 2,
            f">= {REFRESH_EVERY} s apart",
            min(gaps, default=REFRESH_EVERY) >= REFRESH_EVERY - 0.05,
        ),
        figure("SQL per finished run", statements / count, "statements", nan, "context", None),
    ]


def dashboard_round(
    env: BenchEnv, daphne: Daphne, config: dict[str, Any], runs: list[Any]
) -> dict[str, Any]:
    from django.db import transaction

    from runs.models import Run
    from runs.services.runs import run_cancel

    name = "dashboard-pages" if config["refetch"] else "dashboard-push"
    proc, out = spawn_clients(env, name, config)
    finished: dict[str, int] = {}

    def finish(index: int) -> None:
        stamp: list[int] = []
        with transaction.atomic():
            transaction.on_commit(lambda: stamp.append(time.time_ns()))  # before the broadcast
            run_cancel(run=Run.objects.get(pk=runs[index].pk))
        finished[str(runs[index].pk)] = stamp[0]

    statements_before, cpu_before = daphne.statements(), daphne.cpu()
    started = time.monotonic()
    late = paced(len(runs), FINISH_RATE, finish)
    result = collect(env, proc, out, FINISH_SECONDS + GRACE_SECONDS + 60)
    statements = daphne.statements() - statements_before
    cpu, wall = daphne.cpu() - cpu_before, time.monotonic() - started
    latencies = [
        (at - finished[run_id]) / 1e6
        for tab in result["tabs"]
        for run_id, at in tab["finished"]
        if run_id in finished
    ]
    complete = sum(1 for tab in result["tabs"] if len(tab["finished"]) == len(runs))
    p99 = percentile(latencies, 99)
    print(
        f"    connected {len(result['tabs'])}/{DASHBOARDS}; {len(runs)} runs finished"
        f" ({late} behind schedule); tabs that saw every finish: {complete}\n"
        f"    finish commit -> dashboard p50 {percentile(latencies, 50):.1f} ms,"
        f" p99 {p99:.1f} ms over {len(latencies)} deliveries\n"
        f"    daphne CPU {cpu:.2f} s over {wall:.1f} s ({100 * cpu / wall:.0f}% of a core);"
        f" the clients' process {100 * result['cpu_share']:.0f}% of a core;"
        f" load {common.fmt_load(os.getloadavg())}",
        flush=True,
    )
    return {
        **result,
        "p99": p99,
        "complete": complete,
        "statements": statements,
        "messages": sum(tab["frames"] for tab in result["tabs"]),
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
    if len(sys.argv) == 3 and sys.argv[1] == "--clients":
        config = json.loads(Path(sys.argv[2]).read_text())
        result = asyncio.run(clients_main(config))
        Path(config["out"]).write_text(json.dumps(result))
        return
    os.environ.setdefault("BENCH_DATABASE_URL", DATABASE_URL)
    common.standalone(run)


if __name__ == "__main__":
    main()
