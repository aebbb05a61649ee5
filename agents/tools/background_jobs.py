"""Background jobs: the work behind `ctx.start_background(kind, ...)`, by kind.

A worker runs `background_job(kind)(arguments, heartbeat)` outside any run step
(`runs.services.background`). The job must call `heartbeat()` regularly: it keeps the
job's lease alive and answers False once the work was cancelled or another worker took
it over, and the job then stops at once (what it returns is thrown away). A job may run
more than once (its worker died and the sweep ran it again): it must be safe to repeat.
Its return value, JSON-safe, is the result the run receives as a message.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Any

Heartbeat = Callable[[], bool]
Job = Callable[[dict[str, Any], Heartbeat], Any]

# How long the report job sleeps between two heartbeats.
SLICE_SECONDS = 0.25


class UnknownJobError(LookupError):
    """A kind no job is registered for; the message lists the kinds that are."""


def report_job(arguments: dict[str, Any], heartbeat: Heartbeat) -> str | None:
    """A short deterministic report on `topic` after `seconds` of (simulated) work."""
    topic = str(arguments.get("topic") or "").strip() or "(no topic)"
    seconds = float(arguments.get("seconds") or 0)
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        if not heartbeat():
            return None  # cancelled, or another worker has it: stop
        time.sleep(min(SLICE_SECONDS, left))
    if not heartbeat():
        return None
    return report_text(topic, seconds)


def report_text(topic: str, seconds: float) -> str:
    digest = hashlib.sha256(topic.encode()).digest()
    sources, findings, confidence = 3 + digest[0] % 7, 2 + digest[1] % 4, 60 + digest[2] % 40
    return (
        f"Report on {topic}: {sources} sources reviewed in {seconds:g} s; "
        f"{findings} key findings; confidence {confidence}%."
    )


JOBS: dict[str, Job] = {
    "report": report_job,
}


def background_job(kind: str) -> Job:
    try:
        return JOBS[kind]
    except KeyError:
        known = ", ".join(sorted(JOBS)) or "(none)"
        raise UnknownJobError(
            f"Unknown background job kind '{kind}'. Known kinds: {known}."
        ) from None
