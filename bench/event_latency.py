"""Event latency from the worker-side commit to receipt by websocket clients on daphne,
beside raw Redis PUBLISH -> SUBSCRIBE with the same number of subscribers and rate.

System: daphne (channels-redis layer on the private Redis) serves K websocket clients
(a child process, bench/listeners.py, logged in with a session cookie) on one run's
stream. This process plays the worker: at a steady rate it appends one event with
`runs.services.events.events_append` inside `transaction.atomic()` on the locked run.
An on-commit hook registered before events_append's own records `time.time_ns()` right
after COMMIT returns (before the broadcast runs); each client stamps receipt time; the
two are matched by seq. Latency = receipt - commit, for every (client, event) pair.

Baseline: K redis-py asyncio subscribers in the same kind of child process; this process
PUBLISHes at the same rate, stamping just before each PUBLISH.

Rounds alternate baseline/system for K = 1 and 10; the first events of each round are
warm-up and not counted. Goal: p99 < 25 ms on loopback with every event delivered.
Run alone: .venv/bin/python bench/event_latency.py
Django and the application are imported inside functions: they need django.setup(), which
BenchEnv.start() runs first (see bench/common.py).
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import common, fixtures
from bench.common import BenchEnv, BenchError, Figure, median, percentile

BENCHMARK = "event_latency"
CLIENTS = tuple(int(k) for k in os.environ.get("BENCH_LATENCY_CLIENTS", "1,10").split(","))
RATE = float(os.environ.get("BENCH_LATENCY_RATE", "20"))
SECONDS = float(os.environ.get("BENCH_LATENCY_SECONDS", "4"))
ROUNDS = int(os.environ.get("BENCH_LATENCY_ROUNDS", "2"))
WARMUP = 10
GOAL_P99_MS = 25.0
PAD = "x" * 200  # a realistic event payload size (~300 bytes on the wire)
LISTENERS = str(Path(__file__).resolve().with_name("listeners.py"))


@dataclass
class Emitted:
    """What the publisher did: when each seq became visible (commit or PUBLISH), and for
    the system when its run-group group_send returned."""

    visible_ns: dict[int, int] = field(default_factory=dict)
    group_sent_ns: dict[int, int] = field(default_factory=dict)
    late: int = 0
    durations_ms: list[float] = field(default_factory=list)


@dataclass
class Samples:
    latencies_ms: list[float] = field(default_factory=list)
    delivered: int = 0
    expected: int = 0
    late_emits: int = 0  # events the publisher emitted > 1 interval behind schedule
    emit_ms: list[float] = field(default_factory=list)  # publisher time per event
    publish_ms: list[float] = field(default_factory=list)  # commit -> run group_send returned
    deliver_ms: list[float] = field(default_factory=list)  # group_send returned -> receipt

    def add(self, other: Samples) -> None:
        self.latencies_ms += other.latencies_ms
        self.delivered += other.delivered
        self.expected += other.expected
        self.late_emits += other.late_emits
        self.emit_ms += other.emit_ms
        self.publish_ms += other.publish_ms
        self.deliver_ms += other.deliver_ms

    def describe(self) -> str:
        lat = self.latencies_ms
        return (
            f"p50 {median(lat):6.2f} ms  p99 {percentile(lat, 99):6.2f} ms  "
            f"max {max(lat, default=float('nan')):6.2f} ms  "
            f"delivered {self.delivered}/{self.expected}"
        )


def paced(count: int, emit: Any, emitted: Emitted) -> Emitted:
    """Call emit(i) for i in 0..count-1 at RATE; count the calls that started more than
    one interval behind schedule and time each call."""
    interval = 1.0 / RATE
    start = time.monotonic()
    for index in range(count):
        delay = start + index * interval - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        elif delay < -interval:
            emitted.late += 1
        began = time.perf_counter()
        emit(index)
        emitted.durations_ms.append((time.perf_counter() - began) * 1000)
    return emitted


def emit_system(run_id: Any, count: int) -> Emitted:
    from django.db import transaction

    from runs import realtime
    from runs.models import Run
    from runs.services.events import events_append

    emitted = Emitted()
    stamp: dict[str, int] = {}
    original_send = realtime._group_send

    async def send(layer: Any, group: str, message: dict[str, Any]) -> None:
        """Instrumentation (this process only): when the run group's send returned."""
        await original_send(layer, group, message)
        if group.startswith("run."):
            stamp["group_sent_ns"] = time.time_ns()

    def emit(index: int) -> None:
        stamp.clear()
        with transaction.atomic():
            run = Run.objects.select_for_update().get(pk=run_id)
            # registered before events_append's broadcast, so it runs right after COMMIT
            transaction.on_commit(lambda: stamp.__setitem__("commit_ns", time.time_ns()))
            rows = events_append(
                run,
                [
                    {
                        "event_type": "activity_snapshot",
                        "activity_type": "bench",
                        "content": {"index": index, "stamped_ns": time.time_ns(), "pad": PAD},
                    }
                ],
            )
        seq = rows[0].seq
        emitted.visible_ns[seq] = stamp["commit_ns"]
        if "group_sent_ns" in stamp:
            emitted.group_sent_ns[seq] = stamp["group_sent_ns"]

    with mock.patch.object(realtime, "_group_send", send):
        return paced(count, emit, emitted)


def emit_raw(client: Any, channel: str, count: int) -> Emitted:
    emitted = Emitted()

    def emit(index: int) -> None:
        seq = index + 1
        body = json.dumps({"seq": seq, "event_type": "activity_snapshot", "pad": PAD})
        emitted.visible_ns[seq] = time.time_ns()
        client.publish(channel, body)

    return paced(count, emit, emitted)


def listen(
    env: BenchEnv,
    name: str,
    mode: str,
    url: str,
    clients: int,
    count: int,
    extra_env: dict[str, str],
    emit: Any,
) -> Samples:
    """Start the listeners, emit, collect and match by seq (first WARMUP excluded)."""
    out = env.log_dir / f"{name}.json"
    timeout = count / RATE + 15
    proc = env.spawn(
        name,
        [common.PYTHON, LISTENERS, mode, url, str(clients), str(count), str(timeout), str(out)],
        env=extra_env,
        ready=lambda p: "READY" in p.log_tail(200),
        timeout=30,
    )
    try:
        emitted: Emitted = emit()
        common.wait_for(lambda: not proc.alive(), timeout, f"{name} listeners to finish", 0.05)
    finally:
        env.stop(proc)
    if not out.exists():
        raise BenchError(f"{name} wrote no results:\n{proc.log_tail()}")
    result = json.loads(out.read_text())
    if result["errors"]:
        raise BenchError(f"{name} listeners failed: {result['errors'][:3]}")
    measured = sorted(emitted.visible_ns)[WARMUP:]
    wanted = set(measured)
    samples = Samples(
        expected=clients * len(measured),
        late_emits=emitted.late,
        emit_ms=emitted.durations_ms[WARMUP:],
        publish_ms=[
            (emitted.group_sent_ns[seq] - emitted.visible_ns[seq]) / 1e6
            for seq in measured
            if seq in emitted.group_sent_ns
        ],
    )
    for frames in result["clients"]:
        seen = set()
        for seq, received_ns in frames:
            if seq in wanted and seq not in seen:
                seen.add(seq)
                samples.latencies_ms.append((received_ns - emitted.visible_ns[seq]) / 1e6)
                if seq in emitted.group_sent_ns:
                    samples.deliver_ms.append((received_ns - emitted.group_sent_ns[seq]) / 1e6)
        samples.delivered += len(seen)
    return samples


@dataclass
class Setup:
    """What every round uses: daphne, its clients' login, the streamed run, Redis."""

    env: BenchEnv
    daphne: common.Proc
    port: int
    ws_env: dict[str, str]
    run_id: Any
    redis_client: Any
    count: int  # events per round, warm-up included


def run(env: BenchEnv) -> list[Figure]:
    common.print_header("3. Event latency: commit -> websocket on daphne vs Redis pub/sub")
    daphne, port = start_daphne(env)
    ws_env = login_env(port)
    agent = fixtures.create_agent([], tools=[])
    thread = fixtures.create_thread(0)
    trigger = fixtures.append_user_message(thread, "stream me")
    stream_run, _ = fixtures.create_claimed_run(agent, thread, trigger)
    count = WARMUP + int(RATE * SECONDS)
    setup = Setup(env, daphne, port, ws_env, stream_run.pk, env.redis(), count)
    print(
        f"  {RATE:.0f} events/s for {SECONDS:.0f}s per round (+{WARMUP} warm-up), "
        f"{ROUNDS} rounds per side, clients K in {CLIENTS}; one daphne process",
        flush=True,
    )
    figures = []
    try:
        for clients in CLIENTS:
            figures.append(measure_clients(setup, clients))
    finally:
        env.stop(daphne)
    common.print_figures(figures)
    return figures


def start_daphne(env: BenchEnv) -> tuple[common.Proc, int]:
    port = common.free_port()
    daphne = env.spawn(
        "daphne",
        [
            common.PYTHON,
            "-m",
            "daphne",
            "-b",
            common.HOST,
            "-p",
            str(port),
            "awaken_site.asgi:application",
        ],
        ready=lambda p: common.port_open(port),
        timeout=40,
    )
    return daphne, port


def login_env(port: int) -> dict[str, str]:
    """The websocket listeners' environment: a superuser's session cookie and the Origin."""
    from django.contrib.auth.models import User
    from django.test import Client

    user = User.objects.create_superuser(f"bench-watcher-{uuid.uuid4().hex[:6]}", password=None)
    browser = Client()
    browser.force_login(user)
    return {
        "BENCH_WS_COOKIE": f"sessionid={browser.cookies['sessionid'].value}",
        "BENCH_WS_ORIGIN": f"http://{common.HOST}:{port}",
    }


def measure_clients(setup: Setup, clients: int) -> Figure:
    """ROUNDS rounds of raw pub/sub then the system with `clients` listeners; the figure."""
    system, raw = Samples(), Samples()
    for index in range(ROUNDS):
        raw_round, system_round = one_round(setup, clients, index)
        raw.add(raw_round)
        system.add(system_round)
        print(
            f"  K={clients:<3} round {index + 1}: redis {raw_round.describe()}\n"
            f"  {'':<13}daphne {system_round.describe()}"
            f"   load {common.fmt_load(os.getloadavg())}",
            flush=True,
        )
    emit_ms = median(system.emit_ms)
    print(
        f"  K={clients}: publisher (lock, events_append, commit, 2 group_sends) "
        f"{emit_ms:.1f} ms per event median, so one thread sustains <= "
        f"{1000 / emit_ms:.0f} events/s; behind schedule: {system.late_emits} "
        f"system, {raw.late_emits} raw events (PUBLISH {median(raw.emit_ms):.2f} ms)\n"
        f"  K={clients}: latency split: commit -> run group_send returned p50 "
        f"{median(system.publish_ms):.1f} / p99 {percentile(system.publish_ms, 99):.1f} ms"
        f", then -> websocket receipt p50 {median(system.deliver_ms):.1f} / p99 "
        f"{percentile(system.deliver_ms, 99):.1f} ms",
        flush=True,
    )
    p99 = percentile(system.latencies_ms, 99)
    raw_p99 = percentile(raw.latencies_ms, 99)
    print(
        f"  K={clients:<3} all rounds: redis {raw.describe()}\n"
        f"  {'':<13}daphne {system.describe()}   p50 ratio "
        f"{median(system.latencies_ms) / median(raw.latencies_ms):.1f}",
        flush=True,
    )
    return Figure(
        benchmark=BENCHMARK,
        name=f"p99 commit->websocket, K={clients}",
        value=p99,
        unit="ms",
        baseline_name="raw pub/sub p99",
        baseline=raw_p99,
        baseline_unit="ms",
        ratio=p99 / raw_p99,
        goal=f"p99 < {GOAL_P99_MS:.0f} ms, all delivered",
        met=p99 < GOAL_P99_MS and system.delivered == system.expected,
    )


def one_round(setup: Setup, clients: int, index: int) -> tuple[Samples, Samples]:
    """Raw Redis pub/sub, then the system, with `clients` listeners each."""
    from runs.models import Run

    env, count = setup.env, setup.count
    channel = f"bench.latency.{uuid.uuid4().hex}"
    raw_round = listen(
        env,
        f"redis-k{clients}-r{index}",
        "redis",
        env.redis_url,
        clients,
        count,
        {"BENCH_CHANNEL": channel},
        lambda: emit_raw(setup.redis_client, channel, count),
    )
    after = Run.objects.values_list("last_event_seq", flat=True).get(pk=setup.run_id)
    url = f"ws://{common.HOST}:{setup.port}/ws/runs/{setup.run_id}/?after_seq={after}"
    system_round = listen(
        env,
        f"ws-k{clients}-r{index}",
        "ws",
        url,
        clients,
        count,
        setup.ws_env,
        lambda: emit_system(setup.run_id, count),
    )
    if not setup.daphne.alive():
        raise BenchError(f"daphne died:\n{setup.daphne.log_tail()}")
    return raw_round, system_round


if __name__ == "__main__":
    common.standalone(run)
