"""The threads list and the thread page."""

from __future__ import annotations

from typing import Any

from django.db.models import Q

from agents.models import Agent
from runs.models import Message, Run, Thread
from runs.selectors.base import (
    TRANSCRIPT_PAGE,
    Page,
    Rows,
    keyset_page,
    newest_rows,
    seq_window,
    uuid_or_none,
)


def thread_list(
    *, cursor: str | None = None, q: str = "", teams: frozenset[int] | None = None
) -> Page:
    """Threads newest first; `teams`: only these teams' (None: every team)."""
    threads = Thread.objects.select_related("open_run", "latest_run__agent")
    if teams is not None:
        threads = threads.filter(team_id__in=teams)
    if q:
        ident = uuid_or_none(q)
        threads = threads.filter(pk=ident) if ident else threads.filter(Q(title__icontains=q))
    return keyset_page(threads, cursor)


def thread_detail(thread_id: Any) -> tuple[Thread, Rows, Rows] | None:
    """The thread, its newest messages and its newest runs, both oldest first (the last
    run is the latest: the composer offers its agent)."""
    thread = Thread.objects.select_related("open_run__agent").filter(pk=thread_id).first()
    if thread is None:
        return None
    messages = thread_transcript(thread.pk)
    runs = newest_rows(Run.objects.filter(thread=thread).select_related("agent"))
    return thread, messages, runs


def agents_for_composer(teams: frozenset[int] | None = None) -> list[Agent]:
    """The agents a run may be started on (`teams`: of these teams only; None: all)."""
    agents = Agent.objects.order_by("slug")
    if teams is not None:
        agents = agents.filter(team_id__in=teams)
    return list(agents)


def thread_transcript(
    thread_id: Any, *, before_seq: int | None = None, from_seq: int | None = None
) -> Rows:
    return seq_window(
        Message.objects.filter(thread_id=thread_id),
        before_seq=before_seq,
        from_seq=from_seq,
        size=TRANSCRIPT_PAGE,
    )


def thread_messages_page(thread_id: Any, *, before_seq: int | None = None) -> Rows | None:
    """A page of the thread page's transcript, None when there is no such thread."""
    if not Thread.objects.filter(pk=thread_id).exists():
        return None
    return thread_transcript(thread_id, before_seq=before_seq)
