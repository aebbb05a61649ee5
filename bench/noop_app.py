"""A bench-only Celery app with one no-op task: the baseline of bench/e2e_runs.py.

It does not load Django. Its options are the project's CELERY_* settings, handed over by
the driver in BENCH_CELERY_OPTIONS (JSON, see common.celery_settings), so the baseline
worker acks, prefetches and serializes exactly like the project's worker. It consumes its
own queue, so it never takes the project's tasks (and the other way round).

The task's only work is a Redis INCR, which tells the driver when the last one ran.
"""

from __future__ import annotations

import json
import os
import time

import redis
from celery import Celery

QUEUE = "bench_noop"

app = Celery("bench_noop", set_as_current=False)
app.conf.update(json.loads(os.environ.get("BENCH_CELERY_OPTIONS") or "{}"))
app.conf.update(
    broker_url=os.environ.get("CELERY_BROKER_URL") or os.environ.get("REDIS_URL"),
    task_default_queue=QUEUE,
    task_ignore_result=True,
    result_backend=None,
)

_client: redis.Redis | None = None


def _redis() -> redis.Redis:
    global _client
    if _client is None:  # one connection per pool process, made after the fork
        _client = redis.Redis.from_url(os.environ["REDIS_URL"])
    return _client


@app.task(name="bench.noop")
def noop(key: str, total: int) -> None:
    """Count this execution; the one that reaches `total` records when it happened."""
    client = _redis()
    if client.incr(key) == total:
        client.set(f"{key}:done_ns", time.time_ns())
