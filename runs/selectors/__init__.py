"""Reads for the operator pages and the API's lists: each returns what one page or
partial shows, with a query count that does not grow with the number of rows.

By concern: `base` (keyset pages, bounded log windows), `runs` (the runs list and the run
page), `tickets` (the inbox), `threads`, `dashboard` and `audit`. Callers use the names
re-exported here (`from runs import selectors`)."""

from __future__ import annotations

from runs.selectors.base import (
    PAGE_SIZE,
    RELATED_PAGE,
    TIMELINE_PAGE,
    TRANSCRIPT_LIVE,
    TRANSCRIPT_PAGE,
    Page,
    Rows,
    decode_cursor,
    encode_cursor,
    keyset_page,
    seq_window,
)
from runs.selectors.dashboard import (
    Dashboard,
    HealthRow,
    dashboard,
    dashboard_cached,
    dependency_health,
    open_run_counts,
)
from runs.selectors.runs import (
    RUN_SECTIONS,
    SEARCH_MESSAGES,
    WAITING_REASONS,
    RunDetail,
    RunFilters,
    list_row_extras,
    run_detail,
    run_list,
    run_open_tickets,
    run_row,
    run_timeline,
    run_transcript,
    runs_for_list,
)
from runs.selectors.threads import (
    agents_for_composer,
    thread_detail,
    thread_list,
    thread_messages_page,
    thread_transcript,
)

__all__ = [
    "PAGE_SIZE",
    "RELATED_PAGE",
    "RUN_SECTIONS",
    "SEARCH_MESSAGES",
    "TIMELINE_PAGE",
    "TRANSCRIPT_LIVE",
    "TRANSCRIPT_PAGE",
    "WAITING_REASONS",
    "Dashboard",
    "HealthRow",
    "Page",
    "Rows",
    "RunDetail",
    "RunFilters",
    "agents_for_composer",
    "dashboard",
    "dashboard_cached",
    "decode_cursor",
    "dependency_health",
    "encode_cursor",
    "keyset_page",
    "list_row_extras",
    "open_run_counts",
    "run_detail",
    "run_list",
    "run_open_tickets",
    "run_row",
    "run_timeline",
    "run_transcript",
    "runs_for_list",
    "seq_window",
    "thread_detail",
    "thread_list",
    "thread_messages_page",
    "thread_transcript",
]
