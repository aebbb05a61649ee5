"""Every list page and list endpoint answers with as many queries for 50 rows as for 5.

Each case builds the rows its page lists through the real services (runs started and
driven by the worker, tickets decided, children delegated, threads continued), so every
row carries the related data a per-row lookup would read: its agent and version, its
thread and messages, pending tickets, decisions, tool calls, child runs. The request is
made once to warm the process caches, counted with 5 rows, the rows are grown to 50 and
the request is counted again: the two counts must be equal. On failure the message lists
the statements the larger request ran more often.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import caches
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from agents.models import Agent, ModelProvider, RemoteEndpoint
from common.api.auth import THROTTLE_CACHE
from common.api.tokens import token_create
from common.audit import Actor
from common.models import ApiToken, AuditEntry
from runs.models import Run, Thread, Ticket
from runs.services.runs import run_retry
from runs.services.submission_flow import run_start
from runs.services.tickets import decision_submit
from tests.factories import APPROVAL, AgentFactory, call, publish, scripted_agent, user_with_role
from tests.runs.helpers import drive

# each case drives some 60 runs through the worker: ~2 s a case, ~100 s for the module
pytestmark = [pytest.mark.django_db, pytest.mark.slow]

SMALL, LARGE = 5, 50


def note(title: str) -> dict[str, Any]:
    return {
        "text": f"noting {title}",
        "tool_calls": [call("write_note", {"title": title, "body": "b"})],
    }


# --- the rows -----------------------------------------------------------------------------------


class World:
    """The data of one test, grown in place by the cases' builders."""

    def __init__(self) -> None:
        self.user = user_with_role("admin", "quinn")
        self.actor = Actor(user=self.user, source="ui")
        self.serial = itertools.count()
        self.units = 0  # runs made by grow_runs
        self._agents: dict[str, Agent] = {}
        self.long_run: Run | None = None
        self.thread: Thread | None = None
        self.parallel_run: Run | None = None

    # agents, made on first use

    def agent(self, slug: str) -> Agent:
        if slug not in self._agents:
            self._agents[slug] = self._make_agent(slug)
        return self._agents[slug]

    def _make_agent(self, slug: str) -> Agent:
        if slug == "approver":  # asks before writing a note, then answers
            return scripted_agent(
                [note("lunch"), {"text": "noted"}],
                slug=slug,
                tools=["write_note", "calculator"],
                permission=APPROVAL,
            )
        if slug == "chatty":  # a tool call that needs no one, then an answer
            return scripted_agent(
                [
                    {"text": "adding", "tool_calls": [call("calculator", {"expression": "1+2"})]},
                    {"text": "3"},
                ],
                slug=slug,
            )
        if slug == "failing":
            return scripted_agent([{"error": "boom"}], slug=slug)
        if slug == "helper":  # a child that answers at once
            return scripted_agent([{"text": "child answer"}], slug=slug)
        if slug == "scribe":  # a child that waits for approval
            return scripted_agent(
                [note("for the boss"), {"text": "noted"}],
                slug=slug,
                tools=["write_note"],
                permission={"default_behavior": "ask"},
            )
        if slug == "coordinator":  # delegates to the scribe: parent and child both wait
            agent = scripted_agent(
                [
                    {"text": "", "tool_calls": [call("agent_run_scribe", {"prompt": "note it"})]},
                    {"text": "boss done"},
                ],
                slug=slug,
                tools=[],
            )
            agent.delegates.add(self.agent("scribe"))
            publish(agent)
            return agent
        if slug == "long":  # a run of many steps: a note to approve, then a child, again
            script: list[dict[str, Any]] = []
            for index in range(LARGE + 10):
                script.append(note(f"part {index}"))
                script.append(
                    {
                        "text": f"delegating {index}",
                        "tool_calls": [call("agent_run_helper", {"prompt": f"part {index}"})],
                    }
                )
            script.append({"text": "all parts done"})
            agent = scripted_agent(
                script, slug=slug, tools=["write_note"], permission=APPROVAL, max_rounds=1000
            )
            agent.delegates.add(self.agent("helper"))
            publish(agent)
            return agent
        raise KeyError(slug)

    # runs of each kind

    def start(self, slug: str, thread: Thread | None = None) -> Run:
        text = f"please write a note, {next(self.serial)}"
        return drive(
            run_start(agent=self.agent(slug), messages=text, thread=thread, actor=self.actor)
        )

    def decide(self, run: Run, action: str = "approve") -> Run:
        ticket = Ticket.objects.for_operators().get(run=run)
        extra: dict[str, Any] = {}
        if action == "edit":
            extra["arguments"] = {"title": "edited", "body": "b"}
        decision_submit(
            ticket=ticket, action=action, comment=f"{action} it", actor=self.actor, **extra
        )
        return drive(run)

    def waiting(self) -> None:
        self.start("approver")

    def approved(self) -> None:
        self.decide(self.start("approver"), "approve")

    def rejected(self) -> None:
        self.decide(self.start("approver"), "reject")

    def edited(self) -> None:
        self.decide(self.start("approver"), "edit")

    def delegated(self) -> None:  # parent waiting on its child, the child on a ticket
        self.start("coordinator")

    def failed(self) -> None:  # failed, retried, failed again
        run = self.start("failing")
        drive(run_retry(run=run, actor=self.actor))

    def chatty(self) -> None:
        self.start("chatty")

    # growers: make (at least) n of the rows a page lists

    def grow_runs(self, n: int) -> None:
        kinds = [self.waiting, self.approved, self.delegated, self.rejected, self.failed]
        kinds += [self.chatty, self.edited]
        while self.units < n:
            kinds[self.units % len(kinds)]()
            self.units += 1

    def grow_pending(self, n: int) -> None:
        kinds = itertools.cycle([self.waiting, self.delegated, self.approved])
        while Ticket.objects.for_operators().count() < n:
            next(kinds)()

    def grow_decided(self, n: int) -> None:
        kinds = itertools.cycle([self.approved, self.rejected, self.edited, self.waiting])
        while Ticket.objects.filter(status=Ticket.Status.DECIDED).count() < n:
            next(kinds)()

    def grow_audit(self, n: int) -> None:
        kinds = itertools.cycle([self.approved, self.rejected, self.failed])
        while AuditEntry.objects.count() < n:
            next(kinds)()

    def grow_threads(self, n: int) -> None:
        kinds = itertools.cycle([self.waiting, self.approved, self.delegated, self.chatty])
        while Thread.objects.filter(parent_thread=None).count() < n:
            next(kinds)()

    def grow_long_run(self, n: int) -> None:
        """One run with n decided tickets, n child runs, ~12n events; its thread ~4n
        messages; it waits on its next ticket."""
        if self.long_run is None:
            self.long_run = self.start("long")
        while Ticket.objects.filter(run=self.long_run, status=Ticket.Status.DECIDED).count() < n:
            self.long_run = self.decide(self.long_run, "approve")
        assert self.long_run.status == Run.Status.WAITING

    def grow_thread(self, n: int) -> None:
        """One thread with n runs (each asked, decided and done but the last, which waits)
        and ~4n messages."""
        if self.thread is None:
            self.thread = self.start("approver").thread
        while Run.objects.filter(thread=self.thread).count() < n:
            waiting = Run.objects.get(thread=self.thread, status=Run.Status.WAITING)
            self.decide(waiting, "approve" if next(self.serial) % 2 else "reject")
            self.start("approver", thread=self.thread)

    def grow_open_tickets(self, n: int) -> None:
        """A run that waits on n tickets at once (n parallel calls in one step)."""
        agent = scripted_agent(
            [
                {
                    "text": "noting all",
                    "tool_calls": [
                        call("write_note", {"title": f"t{i}", "body": "b"}) for i in range(n)
                    ],
                },
                {"text": "noted"},
            ],
            slug=f"parallel-{n}",
            permission=APPROVAL,
        )
        self.parallel_run = drive(run_start(agent=agent, messages="many notes", actor=self.actor))
        assert Ticket.objects.filter(run=self.parallel_run, status="pending").count() == n

    def grow_agents(self, n: int) -> None:
        while Agent.objects.count() < n:
            index = next(self.serial)
            agent = scripted_agent(
                [{"text": "hi"}], slug=f"agent-{index}", tools=["calculator", "write_note"]
            )
            agent.delegates.add(self.agent("helper"))
            publish(agent)  # a second version

    def grow_endpoints(self, n: int) -> None:
        while RemoteEndpoint.objects.count() < n:
            index = next(self.serial)
            endpoint = RemoteEndpoint.objects.create(
                slug=f"remote-{index}",
                name=f"Remote {index}",
                base_url=f"https://agents-{index}.example.com/a2a",
                health="down" if index % 2 else "ok",
                health_error="connection refused" if index % 2 else "",
            )
            AgentFactory(
                slug=f"remote-agent-{index}", model=None, endpoint=endpoint, published=False
            )

    def grow_providers(self, n: int) -> None:
        while ModelProvider.objects.count() < n:
            index = next(self.serial)
            ModelProvider.objects.create(
                slug=f"provider-{index}", name=f"Provider {index}", kind="scripted"
            )

    def grow_dashboard(self, n: int) -> None:
        self.grow_runs(n)
        self.grow_endpoints(n)
        self.grow_providers(n)

    def grow_tokens(self, n: int) -> None:
        while ApiToken.objects.filter(user=self.user).count() < n:
            index = next(self.serial)
            token_create(user=self.user, name=f"token {index}", actor=self.actor)


# --- the cases ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    grow: Callable[[World, int], None]
    url: Callable[[World], str]
    shown: Callable[[Any], int] | None  # rows the response shows (None: aggregates only)
    client: str = "ui"  # ui (an admin-role user's session), api (their token), admin
    data: Callable[[World], dict[str, Any]] | None = None  # a POST's form


def html(marker: str) -> Callable[[Any], int]:
    return lambda response: response.content.decode().count(marker)


def items(key: str = "items") -> Callable[[Any], int]:
    def shown(response: Any) -> int:
        value = response.json()
        for part in key.split("."):
            value = value[part]
        return len(value)

    return shown


def long_run(w: World) -> Run:
    assert w.long_run is not None
    return w.long_run


def thread_of(w: World) -> Thread:
    assert w.thread is not None
    return w.thread


def parallel(w: World) -> Run:
    assert w.parallel_run is not None
    return w.parallel_run


def first(model: Any, **filters: Any) -> Any:
    return model.objects.filter(**filters).order_by("created_at").first()


RUN_ROW = html('id="run-row-')
TICKET_ROW = html("data-ticket-id=")
TABLE_ROW = html("<tr")
EVENT = html('class="ev"')
MESSAGE = html('class="msg ')
ADMIN_ROW = html('<th class="field-')  # the first cell of each change list row

CASES = [
    # dashboard
    Case("dashboard", World.grow_dashboard, lambda w: "/", None),
    Case("dashboard-stats", World.grow_dashboard, lambda w: "/dashboard/stats", None),
    # runs list
    Case("runs", World.grow_runs, lambda w: "/runs/", RUN_ROW),
    Case("runs-waiting", World.grow_runs, lambda w: "/runs/?status=waiting", RUN_ROW),
    Case(
        "runs-tool-permission",
        World.grow_runs,
        lambda w: "/runs/?status=waiting&waiting_reason=tool_permission",
        RUN_ROW,
    ),
    Case("runs-agent", World.grow_runs, lambda w: "/runs/?agent=approver", RUN_ROW),
    Case("runs-text", World.grow_runs, lambda w: "/runs/?q=note", RUN_ROW),
    Case("runs-reason", World.grow_runs, lambda w: "/runs/?status=done&reason=natural", RUN_ROW),
    Case("runs-provider", World.grow_runs, lambda w: "/runs/?provider=scripted", RUN_ROW),
    Case("runs-since", World.grow_runs, lambda w: "/runs/?since=2000-01-01", RUN_ROW),
    Case(
        "runs-waiting-tool-longest",
        World.grow_runs,
        lambda w: "/runs/?waiting_tool=write_note&waiting_longer_than=0&sort=longest_waiting",
        RUN_ROW,
    ),
    Case(
        "runs-thread",
        World.grow_thread,
        lambda w: f"/runs/?thread={thread_of(w).pk}",
        RUN_ROW,
    ),
    # approvals inbox
    Case("inbox", World.grow_pending, lambda w: "/inbox/", TICKET_ROW),
    Case("inbox-list", World.grow_pending, lambda w: "/inbox/list", TICKET_ROW),
    Case("inbox-agent", World.grow_pending, lambda w: "/inbox/?agent=approver", TICKET_ROW),
    Case("inbox-tool", World.grow_pending, lambda w: "/inbox/list?tool=write_note", TICKET_ROW),
    Case(
        "inbox-bulk-confirm",
        World.grow_pending,
        lambda w: "/inbox/bulk",
        html('name="ticket" value='),
        data=lambda w: {
            "action": "approve",
            "ticket": [str(t.pk) for t in Ticket.objects.for_operators()],
        },
    ),
    Case(
        "inbox-waiting-newest",
        World.grow_pending,
        lambda w: "/inbox/?waiting_longer_than=0&sort=newest",
        TICKET_ROW,
    ),
    Case(
        "inbox-policy-preview",
        World.grow_pending,
        lambda w: "/inbox/policy",
        html("data-policy-ticket="),
        data=lambda w: {"tool": "write_note", "arguments_pattern": 'title ~ "*"'},
    ),
    # audit log, threads, tokens
    Case("audit", World.grow_audit, lambda w: "/audit/", TABLE_ROW),
    Case("audit-decisions", World.grow_audit, lambda w: "/audit/?action=ticket.", TABLE_ROW),
    Case("threads", World.grow_threads, lambda w: "/threads/", TABLE_ROW),
    Case("threads-search", World.grow_threads, lambda w: "/threads/?q=note", TABLE_ROW),
    Case("tokens", World.grow_tokens, lambda w: "/tokens/", TABLE_ROW),
    # a thread page: its messages and its runs
    Case("thread-page", World.grow_thread, lambda w: f"/threads/{thread_of(w).pk}/", TABLE_ROW),
    Case(
        "thread-page-earlier-messages",
        World.grow_thread,
        lambda w: f"/threads/{thread_of(w).pk}/messages?before_seq={thread_of(w).messages.count()}",
        MESSAGE,
    ),
    # a run page and its partials: events, messages, decided tickets, children
    Case("run-page", World.grow_long_run, lambda w: f"/runs/{long_run(w).pk}/", EVENT),
    Case("run-header", World.grow_long_run, lambda w: f"/runs/{long_run(w).pk}/header", html("↳")),
    Case(
        "run-tickets",
        World.grow_long_run,
        lambda w: f"/runs/{long_run(w).pk}/tickets",
        html("<tr><td>write_note"),
    ),
    Case(
        "run-transcript",
        World.grow_long_run,
        lambda w: f"/runs/{long_run(w).pk}/transcript",
        MESSAGE,
    ),
    Case(
        "run-transcript-from",
        World.grow_long_run,
        lambda w: f"/runs/{long_run(w).pk}/transcript?from_seq=1",
        MESSAGE,
    ),
    Case(
        "run-transcript-earlier",
        World.grow_long_run,
        lambda w: (
            f"/runs/{long_run(w).pk}/transcript?before_seq={long_run(w).thread.messages.count()}"
        ),
        MESSAGE,
    ),
    Case("run-timeline", World.grow_long_run, lambda w: f"/runs/{long_run(w).pk}/timeline", EVENT),
    Case(
        "run-timeline-earlier",
        World.grow_long_run,
        lambda w: f"/runs/{long_run(w).pk}/timeline?before_seq={long_run(w).last_event_seq}",
        EVENT,
    ),
    # a run page of a run waiting on many tickets at once
    Case(
        "run-page-open-tickets",
        World.grow_open_tickets,
        lambda w: f"/runs/{parallel(w).pk}/",
        html('class="ticket"'),
    ),
    Case(
        "run-tickets-open",
        World.grow_open_tickets,
        lambda w: f"/runs/{parallel(w).pk}/tickets",
        html('class="ticket"'),
    ),
    # the API
    Case("api-runs", World.grow_runs, lambda w: "/api/v1/runs", items(), client="api"),
    Case(
        "api-runs-waiting",
        World.grow_runs,
        lambda w: "/api/v1/runs?status=waiting&waiting_reason=tool_permission",
        items(),
        client="api",
    ),
    Case(
        "api-runs-agent",
        World.grow_runs,
        lambda w: "/api/v1/runs?agent_id=approver",
        items(),
        client="api",
    ),
    Case(
        "api-runs-waiting-tool",
        World.grow_runs,
        lambda w: "/api/v1/runs?waiting_tool=write_note&sort=longest_waiting",
        items(),
        client="api",
    ),
    Case("api-runs-text", World.grow_runs, lambda w: "/api/v1/runs?q=note", items(), client="api"),
    Case(
        "api-runs-thread",
        World.grow_thread,
        lambda w: f"/api/v1/runs?thread_id={thread_of(w).pk}",
        items(),
        client="api",
    ),
    Case(
        "api-run-open-tickets",
        World.grow_open_tickets,
        lambda w: f"/api/v1/runs/{parallel(w).pk}",
        items("waiting.tickets"),
        client="api",
    ),
    Case(
        "api-run-events",
        World.grow_long_run,
        lambda w: f"/api/v1/runs/{long_run(w).pk}/events",
        items(),
        client="api",
    ),
    Case(
        "api-tickets-pending",
        World.grow_pending,
        lambda w: "/api/v1/tickets?status=pending",
        items(),
        client="api",
    ),
    Case(
        "api-tickets-decided",
        World.grow_decided,
        lambda w: "/api/v1/tickets?status=decided",
        items(),
        client="api",
    ),
    Case("api-audit", World.grow_audit, lambda w: "/api/v1/audit", items(), client="api"),
    Case("api-threads", World.grow_threads, lambda w: "/api/v1/threads", items(), client="api"),
    Case(
        "api-thread",
        World.grow_thread,
        lambda w: f"/api/v1/threads/{thread_of(w).pk}",
        items("runs"),
        client="api",
    ),
    Case(
        "api-thread-messages",
        World.grow_thread,
        lambda w: f"/api/v1/threads/{thread_of(w).pk}/messages",
        items(),
        client="api",
    ),
    Case(
        "api-run-messages",
        World.grow_long_run,
        lambda w: f"/api/v1/threads/{long_run(w).thread_id}/messages?run_id={long_run(w).pk}",
        items(),
        client="api",
    ),
    Case("api-agents", World.grow_agents, lambda w: "/api/v1/agents", items(), client="api"),
    Case(
        "api-endpoints", World.grow_endpoints, lambda w: "/api/v1/endpoints", items(), client="api"
    ),
    # the admin's change lists
    Case("admin-runs", World.grow_runs, lambda w: "/admin/runs/run/", ADMIN_ROW, client="admin"),
    Case(
        "admin-tickets",
        World.grow_pending,
        lambda w: "/admin/runs/ticket/",
        ADMIN_ROW,
        client="admin",
    ),
    Case(
        "admin-decisions",
        World.grow_decided,
        lambda w: "/admin/runs/decision/",
        ADMIN_ROW,
        client="admin",
    ),
    Case(
        "admin-threads",
        World.grow_threads,
        lambda w: "/admin/runs/thread/",
        ADMIN_ROW,
        client="admin",
    ),
    Case(
        "admin-messages",
        World.grow_runs,
        lambda w: "/admin/runs/message/",
        ADMIN_ROW,
        client="admin",
    ),
    Case(
        "admin-tool-calls",
        World.grow_runs,
        lambda w: "/admin/runs/toolcall/",
        ADMIN_ROW,
        client="admin",
    ),
    Case(
        "admin-events",
        World.grow_runs,
        lambda w: "/admin/runs/runevent/",
        ADMIN_ROW,
        client="admin",
    ),
    Case(
        "admin-audit",
        World.grow_audit,
        lambda w: "/admin/common/auditentry/",
        ADMIN_ROW,
        client="admin",
    ),
    Case(
        "admin-agents",
        World.grow_agents,
        lambda w: "/admin/agents/agent/",
        ADMIN_ROW,
        client="admin",
    ),
    Case(
        "admin-endpoints",
        World.grow_endpoints,
        lambda w: "/admin/agents/remoteendpoint/",
        ADMIN_ROW,
        client="admin",
    ),
    Case(
        "admin-notes",
        World.grow_decided,
        lambda w: "/admin/agents/note/",
        ADMIN_ROW,
        client="admin",
    ),
]


# --- the test -----------------------------------------------------------------------------------


@pytest.fixture
def world(settings: Any) -> Any:
    # A verified token is reused for AWAKEN_TOKEN_CACHE_SECONDS and its last use written
    # once a minute: growing to 50 rows can take longer than that on a busy database, and
    # the re-check would be counted as if it grew with the rows. Longer than any test.
    settings.AWAKEN_TOKEN_CACHE_SECONDS = 3600
    caches[THROTTLE_CACHE].clear()
    yield World()
    caches[THROTTLE_CACHE].clear()


def client_for(world: World, kind: str) -> Any:
    if kind == "api":
        _, raw = token_create(user=world.user, name="query counts", actor=world.actor)
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
        return api
    client = Client()
    if kind == "admin":
        client.force_login(User.objects.create_superuser("root", password="pw"))
    else:
        client.force_login(world.user)
    return client


def measure(client: Any, case: Case, world: World) -> tuple[list[str], int]:
    url = case.url(world)
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url) if case.data is None else client.post(url, case.data(world))
    assert response.status_code == 200, (url, response.status_code, response.content[:500])
    shown = case.shown(response) if case.shown else 0
    return [q["sql"] for q in queries.captured_queries], shown


def _shape(sql: str) -> str:
    return re.sub(r"\b\d+\b", "?", re.sub(r"'[^']*'", "?", sql))


def _grown(small: list[str], large: list[str]) -> str:
    before, after = Counter(map(_shape, small)), Counter(map(_shape, large))
    lines = [
        f"  {before[shape]} -> {after[shape]}: {shape[:300]}"
        for shape in after
        if after[shape] != before[shape]
    ]
    lines += [f"  {before[shape]} -> 0: {shape[:300]}" for shape in before if shape not in after]
    return "\n".join(lines)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_query_count_does_not_grow_with_rows(
    case: Case, world: World, record_property: Callable[[str, object], None]
) -> None:
    case.grow(world, SMALL)
    client = client_for(world, case.client)
    measure(client, case, world)  # warms the process caches (permissions, versions)
    small, shown_small = measure(client, case, world)
    case.grow(world, LARGE)
    large, shown_large = measure(client, case, world)
    record_property("queries", f"{len(small)} with {SMALL} rows, {len(large)} with {LARGE}")
    if case.shown is not None:
        assert shown_large > shown_small >= 1, (
            f"the page shows {shown_small} rows with {SMALL} and {shown_large} with {LARGE}: "
            "the builder does not reach it"
        )
    assert len(large) == len(small), (
        f"{case.id}: {len(small)} queries with {SMALL} rows, {len(large)} with {LARGE}; "
        f"statements that changed:\n{_grown(small, large)}"
    )
