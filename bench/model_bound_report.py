"""The report of bench/model_bound.py: one table per workload (every system's medians over
its rounds), the goals of each workload against the better peer measured in the same run,
and the memory of Awaken's processes after the largest workload."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from bench import common, proctree
from bench.common import Figure

BENCHMARK = "model_bound"
AWAKEN = "Awaken Ops"
ZERO = "Awaken Ops, zero-delay model"
GOAL_P50_S = 2.5
GOAL_PEER_RATIO = 1.0
STRETCH_PEER_RATIO = 1.5
GOAL_HIDDEN = 0.8  # runs/s with the model's delay >= 80 % of the zero-delay runs/s
GOAL_RSS_MB_PER_RUN = 1.0
GOAL_PSS_MB = 300.0
NAN = float("nan")


@dataclass
class Measured:
    """One system's round of one workload."""

    system: str
    runs: int
    concurrency: int
    seconds: float
    ok: int
    p50_s: float
    p99_s: float
    errors: list[str] = field(default_factory=list)
    model_max_in_flight: int = 0
    model_calls: int = 0
    model_disconnected: int = 0
    natural: bool | None = None  # Awaken only: every run ended natural
    outcomes: dict[str, int] = field(default_factory=dict)
    pg_max: int | None = None
    rss_growth_mb_per_run: float | None = None
    client_cpu_s: float = float("nan")  # the driver's CPU in the round: client + sampler
    note: str = ""

    @property
    def rate(self) -> float:
        return self.ok / self.seconds if self.seconds > 0 else float("nan")


@dataclass
class Results:
    rounds: dict[tuple[int, int], list[Measured]] = field(default_factory=dict)
    configured_connections: int = 0
    pools_text: str = ""
    pool_errors: list[str] = field(default_factory=list)  # the worker's log
    web_pool_errors: list[str] = field(default_factory=list)  # daphne's (its 503s)
    memory: list[str] = field(default_factory=list)
    pss_mb: float = float("nan")
    unavailable: list[str] = field(default_factory=list)

    def add(self, workload: tuple[int, int], measured: Measured) -> None:
        self.rounds.setdefault(workload, []).append(measured)
        ok = "all natural_end" if measured.natural else ""
        if measured.natural is False:
            ok = "NOT all natural: " + ", ".join(f"{k} {v}" for k, v in measured.outcomes.items())
        print(
            f"  {measured.system:<34} {measured.runs}@{measured.concurrency}: "
            f"{measured.seconds:6.2f}s wall, {measured.rate:6.1f} runs/s, p50 "
            f"{measured.p50_s:5.2f}s, p99 {measured.p99_s:5.2f}s, model in flight max "
            f"{measured.model_max_in_flight}, {measured.model_calls / max(1, measured.runs):.2f} "
            f"model calls per run, driver CPU {cell(measured.client_cpu_s, 1, 's')} {ok} "
            f"{measured.note}" + error_summary(measured.errors),
            flush=True,
        )


def error_summary(errors: list[str]) -> str:
    """ " ERRORS n: count x kind, ..." (the kinds cut to their first 120 characters)."""
    if not errors:
        return ""
    kinds = Counter(error[:120] for error in errors).most_common(3)
    return f" ERRORS {len(errors)}: " + "; ".join(f"{n} x {kind}" for kind, n in kinds)


def med(values: list[float]) -> float:
    return common.median(values) if values else NAN


def cell(value: float | None, digits: int = 2, suffix: str = "") -> str:
    if value is None or value != value:
        return "n/a"
    return f"{value:,.{digits}f}{suffix}"


def by_system(rounds: list[Measured]) -> dict[str, list[Measured]]:
    grouped: dict[str, list[Measured]] = {}
    for measured in rounds:
        grouped.setdefault(measured.system, []).append(measured)
    return grouped


def rate(rounds: list[Measured]) -> float:
    return med([m.rate for m in rounds])


def table(workload: tuple[int, int], grouped: dict[str, list[Measured]], results: Results) -> None:
    runs, concurrency = workload
    header = (
        "system",
        "rounds",
        "wall s",
        "runs/s",
        "p50 s",
        "p99 s",
        "all natural_end",
        "model calls in flight (max)",
        "PG connections (max seen)",
        "worker RSS growth MB / run in flight",
    )
    rows = [header]
    for system, rounds in grouped.items():
        natural = [m.natural for m in rounds]
        pg = [m.pg_max for m in rounds if m.pg_max is not None]
        rss = [m.rss_growth_mb_per_run for m in rounds if m.rss_growth_mb_per_run is not None]
        errors = sum(len(m.errors) for m in rounds)
        rows.append(
            (
                system,
                str(len(rounds)),
                cell(med([m.seconds for m in rounds])),
                cell(rate(rounds), 1),
                cell(med([m.p50_s for m in rounds])),
                cell(med([m.p99_s for m in rounds])),
                "n/a"
                if None in natural
                else ("yes" if all(natural) else "NO")
                + (f" ({errors} client errors)" if errors else ""),
                str(max(m.model_max_in_flight for m in rounds)),
                f"{max(pg)} of {results.configured_connections} configured" if pg else "n/a",
                cell(max(rss), 3) if rss else "n/a",
            )
        )
    print(f"\n  {runs} runs at concurrency {concurrency} (medians over rounds):")
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for index, row in enumerate(rows):
        print("  " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
        if index == 0:
            print("  " + "-+-".join("-" * w for w in widths))
    for system, rounds in grouped.items():
        for measured in rounds:
            if measured.note:
                print(f"  {system}: {measured.note}")
                break


def best_peer(grouped: dict[str, list[Measured]]) -> tuple[str, float]:
    peers = [(name, rate(r)) for name, r in grouped.items() if not name.startswith(AWAKEN)]
    peers = [(name, value) for name, value in peers if value == value]
    if not peers:
        return "no peer (unavailable)", NAN
    return max(peers, key=lambda item: item[1])


def figure(
    name: str,
    value: float,
    unit: str,
    baseline_name: str,
    baseline: float,
    goal: str,
    met: bool | None,
) -> Figure:
    ratio = value / baseline if baseline == baseline and baseline else NAN
    return Figure(BENCHMARK, name, value, unit, baseline_name, baseline, unit, ratio, goal, met)


def workload_figures(
    workload: tuple[int, int], grouped: dict[str, list[Measured]], delay: float
) -> list[Figure]:
    """The issue's goals for 64@64, 256@256 and 1000@1000 (by concurrency: <= 64, below
    1,000, from 1,000 on); other workloads are printed without goals."""
    runs, concurrency = workload
    ours = grouped.get(AWAKEN, [])
    if not ours:
        return []
    tag = f"{runs}@{concurrency}"
    ours_rate = rate(ours)
    peer_name, peer_rate = best_peer(grouped)
    figures = []
    peer_ratio = ours_rate / peer_rate if peer_rate == peer_rate and peer_rate else NAN
    if concurrency < 1000:
        stretch = "" if concurrency <= 64 else f" ({STRETCH_PEER_RATIO}x)"
        figures.append(
            figure(
                f"{tag} runs/s, {delay:g} s model",
                ours_rate,
                "runs/s",
                f"better peer: {peer_name}",
                peer_rate,
                f">= {GOAL_PEER_RATIO:.0f}x better peer{stretch}",
                None if peer_ratio != peer_ratio else peer_ratio >= GOAL_PEER_RATIO,
            )
        )
    if concurrency <= 64:
        p50 = med([m.p50_s for m in ours])
        floor = 2 * delay
        figures.append(
            figure(
                f"{tag} p50 run time",
                p50,
                "s",
                "floor (2 model calls)",
                floor,
                f"<= {GOAL_P50_S * delay:g} s",
                p50 <= GOAL_P50_S * delay,
            )
        )
    elif concurrency < 1000:
        in_flight = max(m.model_max_in_flight for m in ours)
        figures.append(
            figure(
                f"{tag} model calls in flight (max)",
                in_flight,
                "calls",
                "concurrency",
                concurrency,
                f">= {concurrency}",
                in_flight >= concurrency,
            )
        )
    else:
        figures += hidden_figures(tag, ours, grouped.get(ZERO, []), delay)
    return figures


def hidden_figures(
    tag: str, ours: list[Measured], zero_rounds: list[Measured], delay: float
) -> list[Figure]:
    """The largest workload: every run natural_end, and the model's latency hidden (runs/s
    with the delay against the zero-delay runs/s)."""
    ours_rate, zero = rate(ours), rate(zero_rounds)
    hidden = ours_rate / zero if zero == zero and zero else NAN
    # a rate over rounds with failed runs compares nothing: not met
    clean = not any(m.errors for m in [*ours, *zero_rounds])
    return [
        figure(
            f"{tag} runs ended natural_end",
            sum(m.outcomes.get("done:natural", 0) for m in ours),
            "runs",
            "submitted",
            sum(m.runs for m in ours),
            "all",
            all(m.natural for m in ours),
        ),
        figure(
            f"{tag} runs/s, {delay:g} s model" + ("" if clean else " (rounds had errors)"),
            ours_rate,
            "runs/s",
            "zero-delay model, same run",
            zero,
            f">= {GOAL_HIDDEN:.0%} of zero-delay, every run ok",
            None if hidden != hidden else clean and hidden >= GOAL_HIDDEN,
        ),
    ]


def resource_figures(results: Results) -> list[Figure]:
    """PostgreSQL connections, pool errors, RSS growth and PSS over every Awaken round."""
    ours = [m for rounds in results.rounds.values() for m in rounds if m.system == AWAKEN]
    pg = max((m.pg_max or 0 for m in ours), default=0)
    rss = max((m.rss_growth_mb_per_run or 0.0 for m in ours), default=NAN)
    configured = results.configured_connections
    return [
        figure(
            "PostgreSQL connections, max seen (all rounds)",
            pg,
            "connections",
            f"configured pools ({results.pools_text})",
            configured,
            "<= configured pools",
            pg <= configured,
        ),
        figure(
            "connection-pool errors in the worker's log",
            len(results.pool_errors),
            "lines",
            "none",
            NAN,
            "0",
            not results.pool_errors,
        ),
        figure(
            "worker RSS growth per run in flight (max over rounds)",
            rss,
            "MB",
            "none",
            NAN,
            f"<= {GOAL_RSS_MB_PER_RUN:g} MB",
            rss <= GOAL_RSS_MB_PER_RUN if rss == rss else None,
        ),
        figure(
            "PSS daphne + worker + beat after the largest workload",
            results.pss_mb,
            "MB",
            "none",
            NAN,
            f"<= {GOAL_PSS_MB:.0f} MB",
            results.pss_mb <= GOAL_PSS_MB if results.pss_mb == results.pss_mb else None,
        ),
    ]


def print_memory(total: proctree.Memory, parts: dict[str, proctree.Memory]) -> list[str]:
    line = (
        f"  memory after the largest workload: daphne + worker + beat RSS {total.rss_mb:.0f} MB,"
        f" PSS {total.pss_mb:.0f} MB ("
        + ", ".join(
            f"{name} {m.processes} process{'es' if m.processes > 1 else ''} RSS {m.rss_mb:.0f}"
            f" / PSS {m.pss_mb:.0f}"
            for name, m in parts.items()
        )
        + ")"
    )
    print(line, flush=True)
    return [line]


def report(results: Results, workloads: list[tuple[int, int, int]], delay: float) -> list[Figure]:
    figures: list[Figure] = []
    for runs, concurrency, _ in workloads:
        grouped = by_system(results.rounds.get((runs, concurrency), []))
        if not grouped:
            continue
        table((runs, concurrency), grouped, results)
        figures += workload_figures((runs, concurrency), grouped, delay)
    print(f"\n  configured connection pools: {results.pools_text}")
    for who, lines in (("worker", results.pool_errors), ("daphne", results.web_pool_errors)):
        example = f", e.g. {lines[0][:300]}" if lines else ""
        print(f"  connection-pool errors in the {who}'s log: {len(lines)}{example}")
    for line in results.memory:
        print(line)
    for reason in results.unavailable:
        print(f"  unavailable: {reason}")
    figures += resource_figures(results)
    print()
    common.print_figures(figures)
    return figures
