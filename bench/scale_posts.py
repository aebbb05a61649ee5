"""POST /api/v1/runs on the million-run database against a freshly migrated empty one,
interleaved: the submission must not slow down with the data (p50 ratio) nor run more
queries.

Django is imported inside the function: it needs django.setup(), which runs after the
environment is set (see bench/scale_setup.py)."""

from __future__ import annotations

import json
import time

from bench import scale_data
from bench.common import BenchError, percentile, print_header
from bench.scale_report import Row
from bench.scale_setup import use_database
from bench.scale_specs import Target

POSTS = 30
POST_RATIO_GOAL = 1.3


def post_run(target: Target, body: str) -> float:
    """One POST /api/v1/runs on the target's database; its time in ms."""
    use_database(target.db)  # connected before the clock starts
    started = time.perf_counter()
    response = target.api.post("/api/v1/runs", body, content_type="application/json")
    elapsed = (time.perf_counter() - started) * 1000
    if response.status_code != 201:
        raise BenchError(
            f"POST /api/v1/runs on {target.db}: HTTP {response.status_code} "
            f"{response.content[:300]!r}"
        )
    return elapsed


def measure_posts(big: Target, empty: Target, posts: int) -> list[Row]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    print_header("3. POST /api/v1/runs: million-run database vs freshly migrated empty one")
    body = json.dumps(
        {
            "agent_id": scale_data.POST_AGENT,
            "messages": [{"role": "user", "content": "please write a note about the invoice"}],
        }
    )

    def post(target: Target) -> float:
        return post_run(target, body)

    counts = {}
    for target in (big, empty):
        for _ in range(3):
            post(target)
        with CaptureQueriesContext(connection) as captured:
            post(target)
        counts[target.label] = len(captured.captured_queries)
    samples: dict[str, list[float]] = {big.label: [], empty.label: []}
    for index in range(posts):  # interleaved, the order swapped every round
        for target in (big, empty) if index % 2 == 0 else (empty, big):
            samples[target.label].append(post(target))
    big_p50 = percentile(samples[big.label], 50)
    empty_p50 = percentile(samples[empty.label], 50)
    ratio = big_p50 / empty_p50
    for target in (big, empty):
        values = samples[target.label]
        print(
            f"  {target.label:<22} p50 {percentile(values, 50):7.1f} ms  "
            f"p99 {percentile(values, 99):7.1f} ms  queries {counts[target.label]}  n={len(values)}",
            flush=True,
        )
    met = ratio <= POST_RATIO_GOAL
    print(f"  ratio of p50s {ratio:.2f} (goal <= {POST_RATIO_GOAL})", flush=True)
    rows = [
        Row(
            "POST /api/v1/runs p50: 1M runs / empty",
            f"{big_p50:.1f} / {empty_p50:.1f} ms = {ratio:.2f}",
            f"ratio <= {POST_RATIO_GOAL}",
            "met" if met else "NOT met",
        ),
        Row(
            "POST /api/v1/runs queries: 1M runs / empty",
            f"{counts[big.label]} / {counts[empty.label]}",
            "equal",
            "met" if counts[big.label] == counts[empty.label] else "NOT met",
        ),
    ]
    return rows
