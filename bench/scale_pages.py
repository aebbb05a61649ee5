"""Measuring one page or API list of the scale benchmark: the request (following the
page's own cursor for a deep page), its SQL captured once, then timed samples; the same
request's query count on the reference database; for a slow one, the EXPLAIN (ANALYZE,
BUFFERS) of its slowest statement.

Django is imported inside the functions: it needs django.setup(), which runs after the
environment is set (see bench/scale_setup.py)."""

from __future__ import annotations

import html
import re
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from bench.common import percentile, print_header
from bench.scale_setup import REFERENCE_SCALE, use_database
from bench.scale_specs import Spec, Target, build_specs

GOAL_P50_MS = 50.0
GOAL_P99_MS = 200.0
SAMPLES = 20
# A request that takes seconds gets fewer samples: sampling stops after this many
# seconds once it has MIN_SAMPLES (the line says how many it got).
SAMPLE_BUDGET_S = 10.0
MIN_SAMPLES = 5
EXPLAIN_LINES = 45


class RequestFailed(Exception):
    pass


# a link to another page of a list: `?cursor=…` or `/path/?cursor=…`, maybe rel="next"
CURSOR_LINK = re.compile(r'<a\b[^>]*\bhref="([^"?]*\?[^"]*\bcursor=[^"]*)"[^>]*>')


def get(client: Any, path: str) -> Any:
    try:
        response = client.get(path)
    except Exception as exc:  # the view raised: the test client re-raises it
        raise RequestFailed(f"{type(exc).__name__}: {exc}") from exc
    if response.status_code != 200:
        body = response.content[:300].decode(errors="replace")
        raise RequestFailed(f"HTTP {response.status_code} for {path}: {body}")
    return response


def next_page(path: str, response: Any, api: bool) -> str | None:
    """The next page's path as the page exposes it: `next_cursor` in the API's JSON, the
    "older" link (…cursor=…, the one marked rel="next" when a page also links back) on
    an HTML page."""
    if api:
        cursor = response.json().get("next_cursor")
        if not cursor:
            return None
        parts = urlsplit(path)
        query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "cursor"]
        return urlunsplit(parts._replace(query=urlencode([*query, ("cursor", cursor)])))
    anchors = list(CURSOR_LINK.finditer(response.content.decode(errors="replace")))
    if not anchors:
        return None
    following = [a for a in anchors if 'rel="next"' in a.group(0)] or anchors  # not "newer"
    link = html.unescape(following[-1].group(1))
    return urlsplit(path).path + link if link.startswith("?") else link


def resolve(spec: Spec, target: Target, *, partial: bool = False) -> tuple[str | None, str]:
    """The path to measure on `target` (following cursors for a deep page) and a note.
    `partial`: a list shorter than the depth gives its last page (the small reference
    database), else a list without a cursor on its first page is not measured."""
    path = spec.path(target)
    if path is None or not spec.deep:
        return path, ""
    client = target.api if spec.api else target.ui
    for page in range(spec.deep):
        following = next_page(path, get(client, path), spec.api)
        if following is None:
            if page == 0 and not partial:
                return None, "no next cursor on the first page"
            return path, f"list ends after {page + 1} pages"
        path = following
    return path, ""


def capture(client: Any, path: str) -> tuple[list[dict[str, Any]], float]:
    """The request's SQL statements and its time, the smaller of two captures: an API
    token is verified again every few seconds and its last use written once a minute,
    which adds statements to one request now and then; a statement per row does not
    come and go."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    best: tuple[list[dict[str, Any]], float] | None = None
    for _ in range(2):
        with CaptureQueriesContext(connection) as captured:
            started = time.perf_counter()
            get(client, path)
            elapsed = (time.perf_counter() - started) * 1000
        queries = list(captured.captured_queries)
        if best is None or len(queries) < len(best[0]):
            best = (queries, elapsed)
    assert best is not None
    return best


@dataclass
class Result:
    name: str
    path: str = ""
    samples_ms: list[float] = field(default_factory=list)
    queries: int | None = None
    reference_queries: int | None = None
    error: str = ""
    skipped: str = ""
    note: str = ""
    slowest_sql: str = ""
    slowest_sql_ms: float = 0.0
    sql_ms: float = 0.0
    captured_ms: float = 0.0

    @property
    def p50(self) -> float:
        return percentile(self.samples_ms, 50)

    @property
    def p99(self) -> float:
        return percentile(self.samples_ms, 99)

    def failures(self) -> list[str]:
        failed = []
        if self.p50 >= GOAL_P50_MS:
            failed.append("p50")
        if self.p99 >= GOAL_P99_MS:
            failed.append("p99")
        if self.reference_queries is not None and self.queries != self.reference_queries:
            failed.append("queries")
        return failed

    @property
    def slow(self) -> bool:
        return bool(self.samples_ms) and (self.p50 >= GOAL_P50_MS or self.p99 >= GOAL_P99_MS)

    def value(self) -> str:
        if self.error:
            return "ERROR"
        if self.skipped:
            return "skipped"
        reference = "?" if self.reference_queries is None else str(self.reference_queries)
        return (
            f"p50 {self.p50:,.1f} / p99 {self.p99:,.1f} ms, "
            f"{self.queries} queries (ref {reference}), n={len(self.samples_ms)}"
        )

    def verdict(self) -> str:
        if self.error:
            return "ERROR"
        if self.skipped:
            return "n/a"
        failed = self.failures()
        return "met" if not failed else f"NOT met ({', '.join(failed)})"


def reference_count(spec: Spec, target: Target) -> tuple[int | None, str]:
    """The query count of the same request on the 1,000-run reference database."""
    try:
        path, _ = resolve(spec, target, partial=True)
        if path is None:
            return None, ""
        client = target.api if spec.api else target.ui
        get(client, path)
        queries, _ = capture(client, path)
        return len(queries), ""
    except RequestFailed as exc:
        return None, str(exc)


def measure(spec: Spec, target: Target, samples: int) -> Result:
    result = Result(spec.name)
    try:
        path, result.note = resolve(spec, target)
        if path is None:
            result.skipped = spec.missing or result.note or "not offered"
            return result
        result.path = path
        client = target.api if spec.api else target.ui
        get(client, path)  # warm: plans, caches, the session
        queries, result.captured_ms = capture(client, path)
        result.queries = len(queries)
        result.sql_ms = sum(float(q["time"]) for q in queries) * 1000
        if queries:
            slowest = max(queries, key=lambda q: float(q["time"]))
            result.slowest_sql = slowest["sql"]
            result.slowest_sql_ms = float(slowest["time"]) * 1000
        budget_end = time.monotonic() + SAMPLE_BUDGET_S
        for _ in range(samples):
            started = time.perf_counter()
            get(client, path)
            result.samples_ms.append((time.perf_counter() - started) * 1000)
            if len(result.samples_ms) >= MIN_SAMPLES and time.monotonic() > budget_end:
                break
    except RequestFailed as exc:
        result.error = str(exc)
    return result


def explain(sql: str) -> list[str]:
    from django.db import connection

    statement = sql.lstrip()
    if not re.match(r"(?is)^(select|with)\b", statement):
        return [f"(slowest statement is not a SELECT: {statement[:120]})"]
    try:
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + statement)
            return [row[0] for row in cursor.fetchall()]
    except Exception as exc:
        return [f"(EXPLAIN failed: {exc})"]


def print_result(result: Result) -> None:
    if result.error:
        print(f"  {result.name:<58} ERROR: {result.error[:300]}", flush=True)
        return
    if result.skipped:
        print(f"  {result.name:<58} skipped: {result.skipped}", flush=True)
        return
    reference = "?" if result.reference_queries is None else result.reference_queries
    line = (
        f"  {result.name:<58} p50 {result.p50:8.1f} ms (<{GOAL_P50_MS:.0f})"
        f"  p99 {result.p99:8.1f} ms (<{GOAL_P99_MS:.0f})"
        f"  queries {result.queries} (ref {reference})  n={len(result.samples_ms)}"
        f"  {result.verdict()}"
    )
    print(line + (f"  [{result.note}]" if result.note else ""), flush=True)
    if result.slow:
        print(
            f"      captured request: {result.captured_ms:,.1f} ms, of which SQL "
            f"{result.sql_ms:,.1f} ms in {result.queries} queries; slowest statement "
            f"{result.slowest_sql_ms:,.1f} ms:",
            flush=True,
        )
        print("      " + result.slowest_sql[:600].replace("\n", " "), flush=True)
        for line in explain(result.slowest_sql)[:EXPLAIN_LINES]:
            print("      | " + line, flush=True)


def measure_pages(big: Target, reference: Target, samples: int) -> list[Result]:
    specs = build_specs()
    print_header("2. Pages and API lists (in-process, warm)")
    print(
        f"  {len(specs)} requests; each: 1 warm-up, 1 with its queries captured, then "
        f"{samples} timed (fewer, at least {MIN_SAMPLES}, for one that takes seconds). "
        f"'ref' = the same request's query count on the {REFERENCE_SCALE:g}-scale database.",
        flush=True,
    )
    use_database(reference.db)
    references: dict[str, tuple[int | None, str]] = {}
    started = time.monotonic()
    for spec in specs:
        references[spec.name] = reference_count(spec, reference)
    print(f"  reference query counts taken in {time.monotonic() - started:.0f}s", flush=True)
    use_database(big.db)
    results = []
    for spec in specs:
        result = measure(spec, big, samples)
        result.reference_queries, reference_error = references[spec.name]
        if reference_error and not result.error:
            result.note = (result.note + "; " if result.note else "") + (
                f"reference failed: {reference_error[:120]}"
            )
        print_result(result)
        results.append(result)
    return results
