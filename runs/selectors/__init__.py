"""Reads for the operator pages and the API's lists: each returns what one page or
partial shows, with a query count that does not grow with the number of rows.

By concern: `base` (keyset pages, bounded log windows), `runs` (the runs list and the run
page), `threads`, `filters` (reading a list's query string), `waiting` and `run_sort` (the
runs list's orders), `trace*` (a run's trace), `claims` (a ticket's live claim). The names
of `base`, `runs` and `threads` are re-exported here (`from runs import selectors`); the
inbox, the dashboard and the audit log read through their apps' selectors
(runs.decisions, runs.operations, runs.accounts)."""

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
    runs_for_rows,
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
    "Page",
    "Rows",
    "RunDetail",
    "RunFilters",
    "agents_for_composer",
    "decode_cursor",
    "encode_cursor",
    "keyset_page",
    "list_row_extras",
    "run_detail",
    "run_list",
    "run_open_tickets",
    "run_row",
    "run_timeline",
    "run_transcript",
    "runs_for_list",
    "runs_for_rows",
    "seq_window",
    "thread_detail",
    "thread_list",
    "thread_messages_page",
    "thread_transcript",
]
