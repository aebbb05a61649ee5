"""Run the five benchmarks on one private environment and print a summary table.

    make bench            (or: .venv/bin/python bench/run_all.py)

See bench/README.md. Each benchmark also runs alone: .venv/bin/python bench/<name>.py
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import checkpoint_cost, common, e2e_runs, event_latency, model_bound, peers_compare

# peers_compare after Awaken's own: it installs the peers' environment when it is missing;
# model_bound (a 1 s model, Awaken beside the peers) uses that environment too
BENCHMARKS = (e2e_runs, checkpoint_cost, event_latency, peers_compare, model_bound)


def main() -> int:
    try:
        return run_all()
    except common.BenchError as exc:  # the environment itself could not be set up
        print(f"\nbenchmarks failed: {exc}", file=sys.stderr, flush=True)
        return 1


def run_all() -> int:
    failures = []
    figures: list[common.Figure] = []
    with common.bench_environment() as env:
        for module in BENCHMARKS:
            try:
                figures += module.run(env)
            except common.BenchError as exc:
                # a broken benchmark must not hide the others' figures
                failures.append(f"{module.BENCHMARK}: {exc}")
                print(f"\n!! {module.BENCHMARK} failed: {exc}", flush=True)
            except Exception:
                failures.append(f"{module.BENCHMARK}: {traceback.format_exc(limit=3)}")
                traceback.print_exc()
        common.print_summary(figures, env)
        if failures:
            env.keep_logs = True
    if failures:
        print("\nFAILED benchmarks:\n  " + "\n  ".join(f[:2000] for f in failures), flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
