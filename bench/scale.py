"""Scale: every page and API list on a database of a million runs.

    make bench-scale            (or: .venv/bin/python bench/scale.py [--scale 0.05] [--reuse])

1. Loads its own PostgreSQL database (BENCH_SCALE_DATABASE_URL, default
   postgres://postgres@127.0.0.1:5432/awaken_bench_scale; dropped and recreated unless
   --reuse finds the same data set already loaded) with a team's data after ~90 days:
   1,002,504 runs on 200,002 threads, 800,004 messages, 2,065,006 run events, 20,000
   runs waiting on a pending ticket, ~74,000 tickets decided in the last 7 days, 500,000
   audit entries, ten agents (bench/scale_data/). Then `manage.py rebuild_stats`.
2. Measures in-process (Django's test client, a superuser's session for the pages, an API
   token for /api/v1), warm, 20 requests each: p50 / p99 of the time around the request
   and the SQL query count, beside the same request's query count on a 1,000-run
   database (goal: p50 < 50 ms, p99 < 200 ms, the same count). Requests slower than
   the goal get the EXPLAIN (ANALYZE, BUFFERS) of their slowest SQL statement.
   Then the heaviest pages (dashboard and its stats partial, inbox, the 20,000-event run
   page, the admin change lists of tickets and audit entries) through daphne over HTTP
   (scale_daphne.py): p50 / p99 and the body's size, the same goal.
3. POST /api/v1/runs on the million-run database against a freshly migrated empty one,
   interleaved (goal: p50 ratio <= 1.3).
4. Retention while serving: `manage.py prune_runs` removes ~100,000 old runs while a
   thread keeps reading the runs list and another keeps writing runs as a worker would
   (goal: neither waits more than 200 ms above its own baseline).
5. bench/ws_fanout.py, when it exists, as a subprocess.

Connections: one in-process (and daphne's pool during step 2); three during the
retention phase (reader, writer, the prune command). The second database (<name>_empty)
is dropped and recreated every time: empty for step 3, then loaded at scale 0.001 as the
reference of the query counts.
See bench/README.md.

The phases live beside this entry point: scale_setup.py (databases, Django, the data
set), scale_specs.py and scale_pages.py (what is requested, how it is measured),
scale_daphne.py (the heaviest pages over HTTP),
scale_posts.py, scale_retention.py, scale_report.py (the summary table). Django and the
application are imported inside functions only: they need django.setup(), which
scale_setup.configure_django() runs after setting the environment.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import scale_data  # noqa: E402
from bench.common import BenchError, fmt_load, print_header  # noqa: E402
from bench.scale_daphne import measure_daphne  # noqa: E402
from bench.scale_pages import SAMPLES, measure_pages  # noqa: E402
from bench.scale_posts import POSTS, measure_posts  # noqa: E402
from bench.scale_report import Row, page_rows, print_table  # noqa: E402
from bench.scale_retention import measure_retention  # noqa: E402
from bench.scale_setup import (  # noqa: E402
    REFERENCE_SCALE,
    Databases,
    analyze,
    configure_django,
    database_names,
    group_failures,
    prepare_big,
    prepare_empty,
    print_counts,
    print_machine,
    rebuild_stats,
    use_database,
)
from bench.scale_specs import Target  # noqa: E402

WS_FANOUT_TIMEOUT_S = 30 * 60


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the counts (1.0)")
    parser.add_argument(
        "--reuse", action="store_true", help="keep the database when the same scale is loaded"
    )
    parser.add_argument("--samples", type=int, default=SAMPLES, help="timed requests each")
    parser.add_argument("--posts", type=int, default=POSTS, help="POSTs per database")
    parser.add_argument(
        "--prune-batch-size", type=int, default=None, help="default: the command's own"
    )
    parser.add_argument("--skip-daphne", action="store_true", help="no pages through daphne")
    parser.add_argument("--skip-retention", action="store_true")
    parser.add_argument("--skip-ws", action="store_true", help="do not run bench/ws_fanout.py")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    started = time.monotonic()
    load_at_start = os.getloadavg()
    original_env = dict(os.environ)
    try:
        rows, loaded = measure_all(args, original_env)
        print(
            f"\n  data set: scale {args.scale:g}, loaded {loaded.t0:%Y-%m-%d %H:%M} UTC in "
            f"{loaded.prepare_seconds:.0f}s (SQL load {loaded.load_seconds:.0f}s); "
            f"load average at start {fmt_load(load_at_start)}, at end {fmt_load(os.getloadavg())}; "
            f"wall time {time.monotonic() - started:.0f}s",
            flush=True,
        )
        return 1 if any(row.verdict == "ERROR" for row in rows) else 0
    except BenchError as exc:
        print(f"\nbenchmark failed: {exc}", file=sys.stderr, flush=True)
        return 1
    except scale_data.LoadError as exc:
        print(f"\nload failed: {exc}", file=sys.stderr, flush=True)
        return 1
    except Exception:
        traceback.print_exc()
        return 1
    finally:
        try:  # Django is set up unless the failure came first
            from django.db import connections

            connections.close_all()
        except Exception:
            pass


def measure_all(
    args: argparse.Namespace, original_env: dict[str, str]
) -> tuple[list[Row], scale_data.Loaded]:
    """Every phase in order; prints the summary table. Returns its rows and the data set."""
    dbs = database_names()
    configure_django(dbs)
    print_machine(dbs)
    loaded = prepare_big(dbs, args.scale, args.reuse)
    print_counts(loaded)
    print(
        f"  loaded in {loaded.prepare_seconds:.0f}s (SQL load {loaded.load_seconds:.0f}s, "
        f"counters: {loaded.stats})",
        flush=True,
    )
    prepare_empty(dbs)
    big = Target(
        "1M-run database" if args.scale == 1 else f"scale-{args.scale:g} db", dbs.name, loaded
    )
    empty = Target("empty database", dbs.empty, None)
    big.connect()
    empty.connect()
    rows = measure_posts(big, empty, args.posts)
    load_reference(dbs, empty)
    results = measure_pages(big, empty, args.samples)
    rows = page_rows(results) + rows
    if args.skip_daphne:
        rows.append(Row("the heaviest pages through daphne", "skipped (--skip-daphne)", "", "n/a"))
    else:
        rows += measure_daphne(big, args.samples)
    if args.skip_retention:
        rows.append(Row("retention while serving", "skipped (--skip-retention)", "", "n/a"))
    else:
        rows += measure_retention(big, args.scale, args.prune_batch_size)
    if args.skip_ws:
        rows.append(Row("websocket fan-out", "skipped (--skip-ws)", "", "n/a"))
    else:
        rows += run_ws_fanout(original_env)
    print_table(rows)
    return rows, loaded


def load_reference(dbs: Databases, empty: Target) -> None:
    """The `_empty` database, once the POSTs are measured, loaded at REFERENCE_SCALE: the
    reference of the query counts."""
    print_header(f"Reference database: {dbs.empty} loaded at scale {REFERENCE_SCALE:g}")
    use_database(dbs.empty)
    empty.loaded = scale_data.load(REFERENCE_SCALE, special_scale=REFERENCE_SCALE)
    use_database(dbs.empty)
    empty.loaded.stats = rebuild_stats()
    group_failures()
    analyze()
    empty.connect()  # a fresh session after the load


def run_ws_fanout(original_env: dict[str, str]) -> list[Row]:
    from django.db import connection

    print_header("5. Websocket fan-out (bench/ws_fanout.py)")
    if not (ROOT / "bench" / "ws_fanout.py").exists():
        print("  NOTE: bench/ws_fanout.py does not exist (yet): not run", flush=True)
        return [Row("websocket fan-out (bench/ws_fanout.py)", "not run", "", "n/a (missing)")]
    connection.close()
    python = ROOT / ".venv" / "bin" / "python"
    command = [str(python if python.exists() else sys.executable), "-m", "bench.ws_fanout"]
    print(f"  $ {' '.join(command)}", flush=True)
    started = time.monotonic()
    child = subprocess.Popen(
        command,
        cwd=ROOT,
        env=original_env,  # it sets up its own environment, as when run alone
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    deadline = threading.Timer(WS_FANOUT_TIMEOUT_S, lambda: os.killpg(child.pid, signal.SIGTERM))
    deadline.start()
    try:
        assert child.stdout is not None
        for line in child.stdout:
            print("  | " + line.rstrip("\n"), flush=True)
        code = child.wait()
    finally:
        deadline.cancel()
    took = time.monotonic() - started
    print(f"  bench.ws_fanout exited {code} after {took:.0f}s", flush=True)
    return [
        Row(
            "websocket fan-out (bench/ws_fanout.py)",
            f"exit {code} after {took:.0f}s (figures above)",
            "its own goals",
            "ran" if code == 0 else "ERROR",
        )
    ]


if __name__ == "__main__":
    sys.exit(main())
