"""What the scale data set holds: the counts at scale 1, the names the measurements look
for (users, providers, agents, search words), the sizes at a given scale and what a load
leaves behind for the measurements (`Loaded`). No Django here."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

# Counts at scale 1 (a team's database after ~90 days).
THREADS = 200_000
RUNS = 1_000_000  # regular runs, 5 per thread; plus the special threads' runs below
# Messages: 4 on 79 of every 80 regular threads (790,000) + the big thread's 10,000.
AUDIT_ENTRIES = 500_000
DAYS = 90
# Special objects (scaled by `special_scale`, kept at full size in the real bench).
BIG_THREAD_RUNS = 2_500  # the big thread: 2,500 runs and 4 messages each = 10,000 messages
HUGE_RUN_EVENTS = 20_000  # one run with 20,000 events
HUGE_THREAD_EARLIER_RUNS = 3  # the huge run's thread has 3 earlier runs

COMMON_WORD = "invoice"  # in ~40 % of messages
RARE_WORD = "zeppelin"  # in 5 messages
ABSENT_WORD = "xylophone"  # in none: a search that finds nothing

OPERATORS = ("alice", "bob", "carol", "dave")
ADMIN = "bench-admin"
PROVIDER_SCRIPTED = "bench-scripted"
PROVIDER_OPENAI = "bench-openai"
ENDPOINT = "bench-partner-a2a"
POST_AGENT = "note-taker"

# slug, model slug (None: the remote endpoint), two published versions?
AGENTS: tuple[tuple[str, str | None, bool], ...] = (
    ("support-triage", "bench-scripted-small", True),
    ("note-taker", "bench-scripted-small", False),
    ("scheduler", "bench-scripted-small", True),
    ("research-assistant", "bench-gpt-large", False),
    ("billing-assistant", "bench-gpt-large", True),
    ("sales-outreach", "bench-gpt-mini", False),
    ("code-review", "bench-gpt-mini", True),
    ("hr-helpdesk", "bench-scripted-small", False),
    ("partner-bridge", None, True),
    ("data-analyst", "bench-gpt-large", False),
)
FILTER_AGENT = "research-assistant"

# Tables the load writes, child tables last (indexes are rebuilt in this order too).
LOADED_TABLES = (
    "runs_thread",
    "runs_run",
    "runs_message",
    "runs_runevent",
    "runs_toolcall",
    "runs_ticket",
    "runs_decision",
    "runs_auditentry",
)
META_TABLE = "bench_scale_meta"


class LoadError(RuntimeError):
    """The data set could not be loaded (a schema the loader does not know, say)."""


@dataclass
class Sizes:
    threads: int
    runs: int
    audit: int
    big_thread_runs: int
    huge_run_events: int

    @classmethod
    def for_scale(cls, scale: float, special_scale: float) -> Sizes:
        def scaled(n: int, factor: float, least: int) -> int:
            return max(least, round(n * factor))

        threads = scaled(THREADS, scale, 80)
        return cls(
            threads=threads,
            runs=5 * threads,
            audit=scaled(AUDIT_ENTRIES, scale, 400),
            big_thread_runs=scaled(BIG_THREAD_RUNS, special_scale, 3),
            huge_run_events=scaled(HUGE_RUN_EVENTS, special_scale, 20),
        )


@dataclass
class Loaded:
    """What the measurements need to know about a loaded database."""

    t0: dt.datetime
    scale: float
    load_seconds: float
    fixtures: dict[str, str]
    counts: dict[str, int] = field(default_factory=dict)
    stats: str = ""
    pruned: bool = False
    prepare_seconds: float = 0.0  # migrate + SQL load + counters + ANALYZE

    def to_json(self) -> dict[str, Any]:
        return {
            "t0": self.t0.isoformat(),
            "scale": self.scale,
            "load_seconds": self.load_seconds,
            "fixtures": self.fixtures,
            "counts": self.counts,
            "stats": self.stats,
            "pruned": self.pruned,
            "prepare_seconds": self.prepare_seconds,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Loaded:
        return cls(
            t0=dt.datetime.fromisoformat(data["t0"]),
            scale=float(data["scale"]),
            load_seconds=float(data["load_seconds"]),
            fixtures=dict(data["fixtures"]),
            counts=dict(data.get("counts") or {}),
            stats=str(data.get("stats") or ""),
            pruned=bool(data.get("pruned")),
            prepare_seconds=float(data.get("prepare_seconds") or 0.0),
        )
