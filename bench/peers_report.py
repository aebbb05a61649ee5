"""The report of bench/peers_compare.py: the three systems side by side (throughput,
latency, cost), the notes that say what each column holds, and the figures against the
issue's goals, LangGraph's as the baseline."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench import common
from bench.common import Figure
from bench.peers_awaken import SqlFigures
from bench.peers_rounds import SystemResults, med
from bench.peers_settings import (
    AWAKEN,
    BENCHMARK,
    CONCURRENCY,
    DBOS,
    GOAL_APPROVAL_RATIO,
    GOAL_APPROVE_MS,
    GOAL_CPU_MS,
    GOAL_FINISH_MS,
    GOAL_FIRST_EVENT_MS,
    GOAL_MEMORY_MB,
    GOAL_STATEMENTS,
    GOAL_THROUGHPUT_RATIO,
    GOAL_TRANSACTIONS,
    LANGGRAPH,
    MEMORY_RUNS,
    RUNS,
    WORKER_CONCURRENCY,
)

NAN = float("nan")


def ratio(value: float, baseline: float) -> float:
    if baseline != baseline or not baseline:
        return float("nan")
    return value / baseline


def print_table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for index, row in enumerate(rows):
        print("  " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
        if index == 0:
            print("  " + "-+-".join("-" * w for w in widths))


def plain_rate(r: SystemResults) -> float:
    return med([x.rate for x in r.plain])


def approval_rate(r: SystemResults) -> float:
    return med([x.rate for x in r.approval])


def memory_rss(r: SystemResults) -> float:
    return r.memory.rss_mb if r.memory else NAN


def memory_pss(r: SystemResults) -> float:
    return r.memory.pss_mb if r.memory else NAN


def cell(value: float, unit: str = "") -> str:
    return "n/a" if value != value else f"{common.fmt(value)}{unit}"


@dataclass
class Compared:
    """The systems' results side by side; LangGraph's and DBOS's may be missing (nan)."""

    ours: SystemResults
    peer: SystemResults | None
    dbos: dict[str, Any] | None
    sql: SqlFigures

    def lg(self, getter: Callable[[SystemResults], float]) -> float:
        return getter(self.peer) if self.peer is not None else NAN

    def db(self, *path: str) -> float:
        value: Any = self.dbos
        for key in path:
            if not isinstance(value, dict) or key not in value:
                return NAN
            value = value[key]
        return float(value) if value is not None else NAN

    def dbos_median(self, kind: str, key: str) -> float:
        """The median over DBOS's rounds of `kind` ("plain", "approval") of `key`."""
        return med([float(x[key]) for x in self.dbos[kind]]) if self.dbos else NAN

    @property
    def baseline_name(self) -> str:
        return LANGGRAPH if self.peer is not None else "LangGraph (unavailable)"


def report(
    ours: SystemResults,
    peer: SystemResults | None,
    dbos: dict[str, Any] | None,
    sql_figures: SqlFigures,
    unavailable: str,
) -> list[Figure]:
    compared = Compared(ours, peer, dbos, sql_figures)
    print()
    print_table(
        [
            ("figure (median of rounds)", AWAKEN, LANGGRAPH, DBOS, "goal"),
            *throughput_rows(compared),
            *latency_rows(compared),
            *cost_rows(compared),
        ]
    )
    if unavailable:
        print(f"  peers: unavailable ({unavailable})")
    print("\n".join(notes(compared)), flush=True)
    figures = [*throughput_figures(compared), *latency_figures(compared)]
    figures += cost_figures(compared)
    common.print_figures(figures)
    return figures


# --- the table ------------------------------------------------------------------------------


def throughput_rows(c: Compared) -> list[tuple[str, ...]]:
    return [
        (
            f"runs/s, {RUNS} runs at concurrency {CONCURRENCY}",
            cell(plain_rate(c.ours)),
            cell(c.lg(plain_rate)),
            cell(c.dbos_median("plain", "rate")),
            ">= 1.0x LangGraph (2x)",
        ),
        (
            f"approval cycles/s at concurrency {CONCURRENCY}",
            cell(approval_rate(c.ours)),
            cell(c.lg(approval_rate)),
            cell(c.dbos_median("approval", "rate")),
            ">= LangGraph",
        ),
    ]


def latency_rows(c: Compared) -> list[tuple[str, ...]]:
    return [
        (
            "submit -> finish p50, concurrency 1",
            cell(med(c.ours.latency_finish), " ms"),
            cell(c.lg(lambda r: med(r.latency_finish)), " ms"),
            cell(c.db("latency", "finish_p50_ms"), " ms"),
            "<= 50 ms",
        ),
        (
            "submit -> first event p50",
            cell(med(c.ours.latency_first), " ms"),
            cell(c.lg(lambda r: med(r.latency_first)), " ms"),
            "n/a",
            "<= 20 ms",
        ),
        (
            "approve -> finish p50",
            cell(med(c.ours.latency_approve), " ms"),
            cell(c.lg(lambda r: med(r.latency_approve)), " ms"),
            cell(c.db("latency", "approve_p50_ms"), " ms"),
            "<= 50 ms",
        ),
    ]


def cost_rows(c: Compared) -> list[tuple[str, ...]]:
    """CPU, SQL and memory per system."""
    statements, web_st, worker_st = c.sql.per_run("statements")
    transactions, web_tx, worker_tx = c.sql.per_run("transactions")
    return [
        (
            "server CPU per run (throughput phase)",
            cell(med(c.ours.cpu_ms_per_run), " ms"),
            cell(c.lg(lambda r: med(r.cpu_ms_per_run)), " ms"),
            cell(c.dbos_median("plain", "cpu_ms_per_op"), " ms (incl. client)"),
            "<= 20 ms",
        ),
        (
            "server CPU per approval cycle",
            cell(med(c.ours.cpu_ms_per_cycle), " ms"),
            cell(c.lg(lambda r: med(r.cpu_ms_per_cycle)), " ms"),
            cell(c.dbos_median("approval", "cpu_ms_per_op"), " ms (incl. client)"),
            "-",
        ),
        (
            "SQL statements per plain run",
            f"{statements:.1f} (web {web_st:.1f} + worker {worker_st:.1f})",
            "no SQL (in-memory)",
            "not measured",
            "<= 20",
        ),
        (
            "SQL transactions per plain run",
            f"{transactions:.1f} (web {web_tx:.1f} + worker {worker_tx:.1f})",
            "-",
            "not measured",
            "<= 5",
        ),
        (
            f"memory RSS after >= {MEMORY_RUNS} runs",
            cell(memory_rss(c.ours), " MB"),
            cell(c.lg(memory_rss), " MB"),
            cell(c.db("memory", "rss_mb"), " MB (incl. client)"),
            "<= 350 MB",
        ),
        (
            "memory PSS (same processes)",
            cell(memory_pss(c.ours), " MB"),
            cell(c.lg(memory_pss), " MB"),
            cell(c.db("memory", "pss_mb"), " MB"),
            "-",
        ),
    ]


def notes(c: Compared) -> list[str]:
    """What each column holds and what is outside it."""
    ours, peer = c.ours, c.peer
    lines = [
        f"  Awaken processes: daphne + worker (main + {WORKER_CONCURRENCY} children) for CPU, "
        "the same + beat for memory; LangGraph: the `langgraph dev` process tree.",
        "  PostgreSQL's own CPU is in neither column; Awaken's share, from its backends "
        f"(approx.): {cell(med(ours.extra.get('pg_cpu_ms', [])), ' ms')} per run; "
        f"connections to the bench database after a throughput round: "
        f"{', '.join(str(int(n)) for n in ours.extra.get('pg_connections', []))}.",
        "  The CPU floor under Awaken's figure: daphne spends "
        f"{cell(med(ours.extra.get('floor_bare_ms', [])), ' ms')} on a bare Django request and "
        f"{cell(med(ours.extra.get('floor_api_ms', [])), ' ms')} on an authenticated API read; "
        "a plain run takes one (a POST answered with its event stream), an approval cycle "
        "three, before the worker's part.",
        "  First event: Awaken's first SSE data message (run_start); LangGraph's first "
        "message after `metadata` (the model step's update; `metadata` only acknowledges).",
        "  DBOS runs in process: submit -> result with no HTTP and no server, its client "
        "in the same process; shown for context, not as the goals' baseline.",
    ]
    if ours.memory:
        lines.append(
            f"  Awaken memory over {ours.memory.processes} processes after "
            f"{ours.runs_done} runs"
            + (
                f"; LangGraph over {peer.memory.processes} after {peer.runs_done} runs"
                if peer and peer.memory
                else ""
            )
            + (f"; DBOS after {int(c.db('workflows'))} workflows" if c.dbos else "")
            + "."
        )
    return lines


# --- the figures against the goals ------------------------------------------------------------


def figure(
    c: Compared, name: str, value: float, unit: str, baseline: float, goal: str, met: bool | None
) -> Figure:
    return Figure(
        benchmark=BENCHMARK,
        name=name,
        value=value,
        unit=unit,
        baseline_name=c.baseline_name,
        baseline=baseline,
        baseline_unit=unit,
        ratio=ratio(value, baseline),
        goal=goal,
        met=met,
    )


def ratio_met(value: float, baseline: float, goal: float) -> bool | None:
    r = ratio(value, baseline)
    return None if r != r else r >= goal


def throughput_figures(c: Compared) -> list[Figure]:
    ours_plain, ours_approval = plain_rate(c.ours), approval_rate(c.ours)
    lg_plain, lg_approval = c.lg(plain_rate), c.lg(approval_rate)
    return [
        figure(
            c,
            f"runs/s (c={CONCURRENCY}, POST -> run_finish on SSE)",
            ours_plain,
            "runs/s",
            lg_plain,
            f">= {GOAL_THROUGHPUT_RATIO:.1f}x LangGraph (2x)",
            ratio_met(ours_plain, lg_plain, GOAL_THROUGHPUT_RATIO),
        ),
        figure(
            c,
            f"approval cycles/s (c={CONCURRENCY})",
            ours_approval,
            "cycles/s",
            lg_approval,
            ">= LangGraph",
            ratio_met(ours_approval, lg_approval, GOAL_APPROVAL_RATIO),
        ),
    ]


def latency_figures(c: Compared) -> list[Figure]:
    finish, first, approve = (
        med(c.ours.latency_finish),
        med(c.ours.latency_first),
        med(c.ours.latency_approve),
    )
    return [
        figure(
            c,
            "submit -> run_finish p50 (c=1)",
            finish,
            "ms",
            c.lg(lambda r: med(r.latency_finish)),
            f"<= {GOAL_FINISH_MS:.0f} ms",
            finish <= GOAL_FINISH_MS,
        ),
        figure(
            c,
            "submit -> first event p50 (c=1)",
            first,
            "ms",
            c.lg(lambda r: med(r.latency_first)),
            f"<= {GOAL_FIRST_EVENT_MS:.0f} ms",
            first <= GOAL_FIRST_EVENT_MS,
        ),
        figure(
            c,
            "approve -> run_finish p50 (c=1)",
            approve,
            "ms",
            c.lg(lambda r: med(r.latency_approve)),
            f"<= {GOAL_APPROVE_MS:.0f} ms",
            approve <= GOAL_APPROVE_MS,
        ),
    ]


def cost_figures(c: Compared) -> list[Figure]:
    """CPU and memory against LangGraph's; SQL against no baseline."""
    cpu, rss = med(c.ours.cpu_ms_per_run), memory_rss(c.ours)
    statements, _, _ = c.sql.per_run("statements")
    transactions, _, _ = c.sql.per_run("transactions")
    sql_figures = [
        figure(
            c,
            "SQL statements per plain run (web + worker)",
            statements,
            "statements",
            NAN,
            f"<= {GOAL_STATEMENTS:.0f}",
            statements <= GOAL_STATEMENTS,
        ),
        figure(
            c,
            "SQL transactions per plain run (web + worker)",
            transactions,
            "transactions",
            NAN,
            f"<= {GOAL_TRANSACTIONS:.0f}",
            transactions <= GOAL_TRANSACTIONS,
        ),
    ]
    for sql_figure in sql_figures:
        sql_figure.baseline_name = "none"
    cpu_figure = figure(
        c,
        "server CPU per run (daphne + worker)",
        cpu,
        "ms",
        c.lg(lambda r: med(r.cpu_ms_per_run)),
        f"<= {GOAL_CPU_MS:.0f} ms",
        cpu <= GOAL_CPU_MS,
    )
    memory_figure = figure(
        c,
        f"RSS daphne + worker + beat after {c.ours.runs_done} runs",
        rss,
        "MB",
        c.lg(memory_rss),
        f"<= {GOAL_MEMORY_MB:.0f} MB (PSS {cell(memory_pss(c.ours))} MB)",
        rss <= GOAL_MEMORY_MB,
    )
    return [cpu_figure, *sql_figures, memory_figure]
