"""The report of bench/peers_compare.py: the systems side by side (throughput, latency,
cost), the notes that say what each column holds, and the figures against the issue's
goals. LangGraph dev is measured at each `--n-jobs-per-worker` of the settings (1, its
default, and the concurrency); for every figure the better of them is the baseline."""

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
    LANGGRAPH_JOBS_LIST,
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
    peers: list[SystemResults]  # LangGraph dev, one per --n-jobs-per-worker
    dbos: dict[str, Any] | None
    sql: SqlFigures

    def lg_best(
        self, getter: Callable[[SystemResults], float], higher: bool = True
    ) -> tuple[str, float]:
        """(which configuration, its value): the better LangGraph figure."""
        values = [(p.name, getter(p)) for p in self.peers]
        values = [(name, value) for name, value in values if value == value]
        if not values:
            return "LangGraph (unavailable)", NAN
        pick = max if higher else min
        return pick(values, key=lambda item: item[1])

    def lg_cells(self, getter: Callable[[SystemResults], float], unit: str = "") -> list[str]:
        return [cell(getter(p), unit) for p in self.peers]

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


def report(
    ours: SystemResults,
    peers: list[SystemResults],
    dbos: dict[str, Any] | None,
    sql_figures: SqlFigures,
    unavailable: str,
) -> list[Figure]:
    compared = Compared(ours, peers, dbos, sql_figures)
    print()
    print_table(
        [
            ("figure (median of rounds)", AWAKEN, *[p.name for p in peers], DBOS, "goal"),
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
            *c.lg_cells(plain_rate),
            cell(c.dbos_median("plain", "rate")),
            ">= 1.0x LangGraph (2x)",
        ),
        (
            f"approval cycles/s at concurrency {CONCURRENCY}",
            cell(approval_rate(c.ours)),
            *c.lg_cells(approval_rate),
            cell(c.dbos_median("approval", "rate")),
            ">= LangGraph",
        ),
    ]


def latency_rows(c: Compared) -> list[tuple[str, ...]]:
    return [
        (
            "submit -> finish p50, concurrency 1",
            cell(med(c.ours.latency_finish), " ms"),
            *c.lg_cells(lambda r: med(r.latency_finish), " ms"),
            cell(c.db("latency", "finish_p50_ms"), " ms"),
            "<= 50 ms",
        ),
        (
            "submit -> first event p50",
            cell(med(c.ours.latency_first), " ms"),
            *c.lg_cells(lambda r: med(r.latency_first), " ms"),
            "n/a",
            "<= 20 ms",
        ),
        (
            "approve -> finish p50",
            cell(med(c.ours.latency_approve), " ms"),
            *c.lg_cells(lambda r: med(r.latency_approve), " ms"),
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
            *c.lg_cells(lambda r: med(r.cpu_ms_per_run), " ms"),
            cell(c.dbos_median("plain", "cpu_ms_per_op"), " ms (incl. client)"),
            "<= 20 ms",
        ),
        (
            "server CPU per approval cycle",
            cell(med(c.ours.cpu_ms_per_cycle), " ms"),
            *c.lg_cells(lambda r: med(r.cpu_ms_per_cycle), " ms"),
            cell(c.dbos_median("approval", "cpu_ms_per_op"), " ms (incl. client)"),
            "-",
        ),
        (
            "SQL statements per plain run",
            f"{statements:.1f} (web {web_st:.1f} + worker {worker_st:.1f})",
            *["no SQL (in-memory)"] * len(c.peers),
            "not measured",
            "<= 20",
        ),
        (
            "SQL transactions per plain run",
            f"{transactions:.1f} (web {web_tx:.1f} + worker {worker_tx:.1f})",
            *["-"] * len(c.peers),
            "not measured",
            "<= 5",
        ),
        (
            f"memory RSS after >= {MEMORY_RUNS} runs",
            cell(memory_rss(c.ours), " MB"),
            *c.lg_cells(memory_rss, " MB"),
            cell(c.db("memory", "rss_mb"), " MB (incl. client)"),
            "<= 350 MB",
        ),
        (
            "memory PSS (same processes)",
            cell(memory_pss(c.ours), " MB"),
            *c.lg_cells(memory_pss, " MB"),
            cell(c.db("memory", "pss_mb"), " MB"),
            "-",
        ),
    ]


def notes(c: Compared) -> list[str]:
    """What each column holds and what is outside it."""
    ours = c.ours
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
        "  LangGraph dev is measured at --n-jobs-per-worker "
        + " and ".join(str(jobs) for jobs in LANGGRAPH_JOBS_LIST)
        + " (1, its CLI's default: one run at a time; N: up to N runs at once); each "
        "figure's baseline is the better of them.",
    ]
    if ours.memory:
        lines.append(
            f"  Awaken memory over {ours.memory.processes} processes after "
            f"{ours.runs_done} runs"
            + "".join(
                f"; {peer.name} over {peer.memory.processes} after {peer.runs_done} runs"
                for peer in c.peers
                if peer.memory
            )
            + (f"; DBOS after {int(c.db('workflows'))} workflows" if c.dbos else "")
            + "."
        )
    return lines


# --- the figures against the goals ------------------------------------------------------------


def figure(
    c: Compared,
    name: str,
    value: float,
    unit: str,
    baseline: tuple[str, float],
    goal: str,
    met: bool | None,
) -> Figure:
    """`baseline`: (which LangGraph configuration, its figure), from Compared.lg_best."""
    return Figure(
        benchmark=BENCHMARK,
        name=name,
        value=value,
        unit=unit,
        baseline_name=baseline[0] if len(c.peers) < 2 else f"better LangGraph: {baseline[0]}",
        baseline=baseline[1],
        baseline_unit=unit,
        ratio=ratio(value, baseline[1]),
        goal=goal,
        met=met,
    )


def ratio_met(value: float, baseline: float, goal: float) -> bool | None:
    r = ratio(value, baseline)
    return None if r != r else r >= goal


def throughput_figures(c: Compared) -> list[Figure]:
    ours_plain, ours_approval = plain_rate(c.ours), approval_rate(c.ours)
    lg_plain, lg_approval = c.lg_best(plain_rate), c.lg_best(approval_rate)
    return [
        figure(
            c,
            f"runs/s (c={CONCURRENCY}, POST -> run_finish on SSE)",
            ours_plain,
            "runs/s",
            lg_plain,
            f">= {GOAL_THROUGHPUT_RATIO:.1f}x LangGraph (2x)",
            ratio_met(ours_plain, lg_plain[1], GOAL_THROUGHPUT_RATIO),
        ),
        figure(
            c,
            f"approval cycles/s (c={CONCURRENCY})",
            ours_approval,
            "cycles/s",
            lg_approval,
            ">= LangGraph",
            ratio_met(ours_approval, lg_approval[1], GOAL_APPROVAL_RATIO),
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
            c.lg_best(lambda r: med(r.latency_finish), higher=False),
            f"<= {GOAL_FINISH_MS:.0f} ms",
            finish <= GOAL_FINISH_MS,
        ),
        figure(
            c,
            "submit -> first event p50 (c=1)",
            first,
            "ms",
            c.lg_best(lambda r: med(r.latency_first), higher=False),
            f"<= {GOAL_FIRST_EVENT_MS:.0f} ms",
            first <= GOAL_FIRST_EVENT_MS,
        ),
        figure(
            c,
            "approve -> run_finish p50 (c=1)",
            approve,
            "ms",
            c.lg_best(lambda r: med(r.latency_approve), higher=False),
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
            ("none", NAN),
            f"<= {GOAL_STATEMENTS:.0f}",
            statements <= GOAL_STATEMENTS,
        ),
        figure(
            c,
            "SQL transactions per plain run (web + worker)",
            transactions,
            "transactions",
            ("none", NAN),
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
        c.lg_best(lambda r: med(r.cpu_ms_per_run), higher=False),
        f"<= {GOAL_CPU_MS:.0f} ms",
        cpu <= GOAL_CPU_MS,
    )
    memory_figure = figure(
        c,
        f"RSS daphne + worker + beat after {c.ours.runs_done} runs",
        rss,
        "MB",
        c.lg_best(memory_rss, higher=False),
        f"<= {GOAL_MEMORY_MB:.0f} MB (PSS {cell(memory_pss(c.ours))} MB)",
        rss <= GOAL_MEMORY_MB,
    )
    return [cpu_figure, *sql_figures, memory_figure]
