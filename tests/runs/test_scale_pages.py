"""The operator's heaviest pages at scale (a million runs): what they read and render stays
bounded whatever the size of a run or a table. The fork form of a run of thousands of
steps, the timeline rows built without a template per row, the admin change lists of
tickets and audit entries (no join of the run's relations, filter values without a
DISTINCT over every row), the inbox's page size and the dashboard's usage sums of the
hours that can no longer change."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
from django.db import connection
from django.template import Context, Template
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from common.audit import Actor, audit_record
from runs.models import HourlyUsage, Message, Run, RunEvent, Ticket
from runs.operations.selectors.usage import usage
from runs.realtime import render_event_row
from runs.replays.selectors.forks import fork_cuts, fork_panel
from runs.services import stats
from runs.templatetags.runs_extras import event_row
from tests.factories import done_run, waiting_run

pytestmark = pytest.mark.django_db

# The timeline row as runs/partials/event_row.html rendered it with the template engine.
TEMPLATE_ROW = (
    '{% load runs_extras wording_tags %}<div class="ev" id="ev-{{ event.seq }}" data-seq="{{ event.seq }}">\n'
    '  <span class="mono muted">{{ event.seq }}</span>\n'
    '  <span class="mono small muted">{% when event.created_at "clock" %}</span>\n'
    '  <details><summary><b title="{{ event.event_type }}">{{ event.event_type|say:"event" }}</b> '
    '<span class="small">{{ event|event_summary }}</span></summary>'
    "<pre>{{ event|pretty_json }}</pre></details>\n"
    "</div>\n"
)

FRAMES: list[dict[str, Any]] = [
    {
        "event_type": "text_delta",
        "delta": "<script>alert(1)</script> & “quotes”",
        "seq": 7,
        "created_at": "2026-11-25T15:02:52.150000+00:00",
    },
    {
        "event_type": "tool_call_ready",
        "name": "write_note",
        "arguments": {"title": "<b>x</b>", "n": 1.5},
        "seq": 12345,
        "created_at": "2026-11-25T15:02:52+00:00",
    },
    {"event_type": "run_finish", "termination": {"type": "natural", "value": None}, "seq": 3},
    {"event_type": None, "seq": None, "created_at": None},
    {"delta": "no type, no seq, no time"},
    {"event_type": "error", "message": 'it\'s "broken"', "seq": 1, "created_at": "garbage"},
]


@pytest.mark.parametrize("frame", FRAMES, ids=range(len(FRAMES)))
def test_a_timeline_row_is_what_the_row_template_rendered(frame: dict[str, Any]) -> None:
    assert event_row(frame) == Template(TEMPLATE_ROW).render(Context({"event": frame}))


def test_the_run_page_and_the_live_stream_render_the_same_rows(root_client: Client) -> None:
    run = done_run()
    events = list(RunEvent.objects.filter(run=run).order_by("seq"))
    page = root_client.get(reverse("runs:run-detail", args=[run.pk])).content.decode()
    for event in events:
        assert render_event_row(event.as_frame()) in page


def many_step_run(steps: int) -> Run:
    """A done run of `steps` steps that wrote one message in each of a few of them."""
    run = done_run()
    written = {0: 2, 3: 3, steps - 1: 4}
    Message.objects.filter(thread_id=run.thread_id).delete()
    Message.objects.create(thread_id=run.thread_id, seq=1, role="user", content=[])
    for step, seq in written.items():
        Message.objects.create(
            thread_id=run.thread_id,
            seq=seq,
            role="assistant",
            content=[{"type": "text", "text": f"step {step}"}],
            produced_by_run=run,
            step_index=step,
        )
    Run.objects.filter(pk=run.pk).update(steps=steps)
    run.refresh_from_db()
    return run


def test_the_fork_form_of_a_run_of_thousands_of_steps_lists_a_bounded_few() -> None:
    run = many_step_run(3000)
    cuts = fork_cuts(run)
    assert len(cuts) == 3001
    assert cuts[:5] == [1, 2, 2, 2, 3] and cuts[-2:] == [3, 4]
    panel = fork_panel(run)
    listed = [b.step for b in panel.boundaries]
    assert len(listed) <= 60, len(listed)
    assert listed[0] == 0 and listed[-1] == 3000 and panel.step == 3000
    assert panel.boundary_count == 3001 and panel.unlisted == 3001 - len(listed)
    # each listed boundary as the whole list had it
    assert [b.cut for b in panel.boundaries] == [cuts[step] for step in listed]
    # picking one lists those around it
    around = fork_panel(run, step=1500)
    steps = [b.step for b in around.boundaries]
    assert set(range(1490, 1511)) <= set(steps) and around.step == 1500
    assert len(steps) <= 60


def test_the_fork_form_of_a_short_run_lists_every_boundary(root_client: Client) -> None:
    run = many_step_run(8)
    assert [b.step for b in fork_panel(run).boundaries] == list(range(9))
    page = root_client.get(reverse("runs:run-detail", args=[run.pk])).content.decode()
    assert len(re.findall(r'name="step" value="\d+"', page)) == 9
    assert 'id="fork-unlisted"' not in page


def test_the_run_page_of_a_long_run_says_which_boundaries_it_lists(root_client: Client) -> None:
    run = many_step_run(3000)
    page = root_client.get(reverse("runs:run-detail", args=[run.pk])).content.decode()
    assert len(re.findall(r'name="step" value="\d+"', page)) <= 60
    assert "of the 3001 step boundaries listed" in page


# --- the admin change lists -----------------------------------------------------------------


def change_list(client: Client, url: str) -> tuple[str, list[str]]:
    client.get(url)  # warm
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200
    return response.content.decode(), [q["sql"] for q in captured.captured_queries]


def test_the_ticket_change_list_reads_no_run_and_orders_by_its_index(root_client: Client):
    tickets = [waiting_run(f"note {i}").tickets.get() for i in range(3)]
    page, queries = change_list(root_client, reverse("admin:runs_ticket_changelist"))
    rows = [q for q in queries if q.startswith('SELECT "runs_ticket"."id"') and "ORDER BY" in q]
    assert rows, queries
    assert all('"runs_run"' not in q for q in rows), rows  # no join of the run's relations
    assert all('"runs_ticket"."created_at" ASC, "runs_ticket"."id" ASC' in q for q in rows)
    for ticket in tickets:  # the run column shows the run's id
        assert f'<td class="field-run_ref">{ticket.run_id}</td>' in page
    assert "?tool_name=write_note" in page
    assert len(queries) == len(change_list(root_client, reverse("admin:runs_ticket_changelist"))[1])


def test_the_change_list_counts_in_one_statement_small_or_large(root_client: Client) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("the estimate is PostgreSQL's")
    for i in range(3):
        waiting_run(f"note {i}")
    url = reverse("admin:runs_ticket_changelist")
    with connection.cursor() as cursor:
        cursor.execute("UPDATE pg_class SET reltuples = 3 WHERE oid = 'runs_ticket'::regclass")
    small_page, small = change_list(root_client, url)  # a small table: counted exactly
    assert "3 tickets" in small_page
    with connection.cursor() as cursor:  # as the planner sees a million (rolled back)
        cursor.execute("UPDATE pg_class SET reltuples = 1e6 WHERE oid = 'runs_ticket'::regclass")
    large_page, large = change_list(root_client, url)
    assert "1000000 tickets" in large_page
    assert len(small) == len(large), (small, large)


def test_the_audit_change_list_offers_each_action_and_source(root_client: Client) -> None:
    for action, source in [("run.start", "api"), ("ticket.approve", "ui"), ("run.start", "cli")]:
        audit_record(
            actor=Actor(label="olga", source=source),
            action=action,
            target_type="run",
            target_id="x",
        )
    page, queries = change_list(root_client, reverse("admin:common_auditentry_changelist"))
    assert re.findall(r'href="\?action=([^"]+)"', page) == ["run.start", "ticket.approve"]
    assert re.findall(r'href="\?source=([^"]+)"', page) == ["api", "cli", "ui"]
    if connection.vendor == "postgresql":  # values by skipping through the index
        assert not [q for q in queries if "DISTINCT" in q], queries
        assert sum("WITH RECURSIVE" in q for q in queries) == 2


def test_a_filtered_audit_change_list_still_offers_the_values(root_client: Client) -> None:
    for label, source, action in [("olga", "api", "run.start"), ("ivan", "ui", "run.cancel")]:
        actor = Actor(label=label, source=source)
        audit_record(actor=actor, action=action, target_type="run", target_id="x")
    url = reverse("admin:common_auditentry_changelist") + "?source=ui"
    page, _ = change_list(root_client, url)
    assert re.findall(r'href="\?action=([^"&]+)&amp;source=ui"', page) == [
        "run.cancel",
        "run.start",
    ]
    assert "ivan" in page and "olga" not in page


# --- the dashboard's usage sums -------------------------------------------------------------


def usage_row(hour: dt.datetime, agent_id: int, metric: str, count: int) -> None:
    HourlyUsage.objects.create(
        hour=hour, agent_id=agent_id, kind="agent", name="", metric=metric, count=count
    )


def test_usage_sums_the_settled_hours_once_and_the_current_hour_each_time() -> None:
    run = done_run()
    now = stats.hour_of(timezone.now())
    start, end = now - dt.timedelta(days=7), now + dt.timedelta(hours=1)
    HourlyUsage.objects.all().delete()
    usage_row(now - dt.timedelta(days=2), run.agent_id, "runs", 5)
    usage_row(now - dt.timedelta(days=2), run.agent_id, "dur:3", 5)
    with CaptureQueriesContext(connection) as first:
        figures = usage(start, end)
    assert [row["runs"] for row in figures["by_agent"]] == [5]
    # a run that finishes now counts at once; the settled hours are not read again
    usage_row(timezone.now(), run.agent_id, "runs", 1)
    usage_row(timezone.now(), run.agent_id, "dur:3", 1)
    with CaptureQueriesContext(connection) as second:
        figures = usage(start, end)
    assert [row["runs"] for row in figures["by_agent"]] == [6]
    # the counters' generation, then two grouped reads of the settled hours (the first
    # time) and two of the current hour
    assert len(second) == 3 and len(first) == 5, (len(first), len(second))
    # another agent filter, another sum
    assert usage(start, end, agent="nobody")["by_agent"] == []


def test_a_window_that_ended_long_ago_is_summed_once() -> None:
    run = done_run()
    hour = stats.hour_of(timezone.now()) - dt.timedelta(days=3)
    HourlyUsage.objects.all().delete()
    usage_row(hour, run.agent_id, "runs", 2)
    usage_row(hour, run.agent_id, "cost_nusd", 7)
    start, end = hour - dt.timedelta(hours=5), hour + dt.timedelta(hours=5)
    assert usage(start, end)["by_agent"][0]["runs"] == 2
    with CaptureQueriesContext(connection) as again:
        figures = usage(start, end)
    assert len(again) == 1  # the counters' generation only
    # summed over the window's days (it crosses midnight UTC at some times of day)
    days = figures["by_agent"][0]["cost_per_day"]
    assert sum(day["cost_usd"] for day in days) * 10**9 == 7
    stats.rebuild()  # every counter row anew (none: no run finished in the window)
    assert usage(start, end)["by_agent"] == []


# --- the inbox ------------------------------------------------------------------------------


def test_the_inbox_lists_fifty_tickets_a_page(root_client: Client) -> None:
    for i in range(55):
        waiting_run(f"note {i}")
    page = root_client.get(reverse("runs:inbox")).content.decode()
    assert page.count('id="ticket-row-') == 50
    assert "cursor=" in page  # the next page holds the rest
    assert Ticket.objects.filter(status=Ticket.Status.PENDING).count() == 55


def test_the_inbox_reads_no_run_state_agent_configuration_or_call_arguments(
    root_client: Client,
) -> None:
    """A run's state and requests, its agent's prompt and rules, the tool call's arguments
    are large JSON documents no inbox row shows (the ticket has its own arguments)."""
    for i in range(3):
        waiting_run(f"note {i}")
    with CaptureQueriesContext(connection) as queries:
        page = root_client.get(reverse("runs:inbox")).content.decode()
    assert page.count('id="ticket-row-') == 3
    rows = [q["sql"] for q in queries.captured_queries if 'FROM "runs_ticket" INNER' in q["sql"]]
    listed = [sql for sql in rows if '"agents_agent"."slug"' in sql]  # the page's tickets
    assert len(listed) == 1
    for column in ('"runs_run"."state"', '"runs_run"."request"', '"agents_agent"."permission"'):
        assert column not in listed[0]
    assert '"runs_toolcall"."arguments"' not in listed[0]
    assert '"runs_ticket"."arguments"' in listed[0]


def test_the_run_page_reads_its_run_without_ordering(root_client: Client) -> None:
    """One row by its primary key: no ORDER BY (Django's compiler works through each of
    the seven joined models' columns to order a select)."""
    run = done_run()
    with CaptureQueriesContext(connection) as queries:
        assert root_client.get(reverse("runs:run-detail", args=[run.pk])).status_code == 200
    first = next(q["sql"] for q in queries.captured_queries if 'FROM "runs_run" INNER' in q["sql"])
    assert "ORDER BY" not in first and "LIMIT 1" in first


# An inbox row's who cell as runs/partials/ticket_who.html rendered it, included per row.
TEMPLATE_WHO = (
    '{% load runs_extras %}{% if claim %}<span class="badge" data-claim>{% if claim.mine %}'
    "you are{% else %}{{ claim.by }} is{% endif %} on this, {{ claim.left }}</span>{% endif %}\n"
    '{% if t.assigned_to_id %}<span class="small nowrap" data-assignee>assigned to '
    "{% if t.assigned_to_id == user.pk %}you{% else %}{{ t.assigned_to.get_username }}{% endif %}"
    '</span>{% elif not claim and not can.decide %}<span class="muted small">nobody</span>{% endif %}\n'
    "{% if can.decide %}{% row_url 'runs:ticket-claim' t.pk as claim_url %}"
    "{% row_url 'runs:ticket-release' t.pk as release_url %}"
    "{% row_url 'runs:ticket-assign' t.pk as assign_url %}"
    '<div class="small">\n'
    '  {% if claim.mine %}<button type="submit" class="link" formaction="{{ release_url }}" '
    'formmethod="post" hx-post="{{ release_url }}" hx-target="{{ target }}" hx-swap="innerHTML"'
    "{% if t.frozen_team %} disabled{% endif %}>Release</button>\n"
    '  {% elif not claim %}<button type="submit" class="link" formaction="{{ claim_url }}" '
    'formmethod="post" hx-post="{{ claim_url }}" hx-target="{{ target }}" hx-swap="innerHTML"'
    "{% if t.frozen_team %} disabled{% endif %}>Claim</button>{% endif %}\n"
    '  <select name="assignee-{{ t.pk }}"{% if t.frozen_team %} disabled{% endif %} '
    'aria-label="Assign {{ t.tool_name }} {{ t.pk|short_id }} to"><option value="">nobody'
    '</option>{% for u in deciders %}<option value="{{ u.username }}"'
    "{% if u.pk == t.assigned_to_id %} selected{% endif %}>{{ u.username }}</option>{% endfor %}"
    "</select>\n"
    '  <button type="submit" class="link" formaction="{{ assign_url }}" formmethod="post" '
    'hx-post="{{ assign_url }}" hx-target="{{ target }}" hx-swap="innerHTML"'
    "{% if t.frozen_team %} disabled{% endif %}>Assign</button>\n"
    "</div>{% endif %}"
)


def _blank(html: str) -> str:
    return re.sub(r">\s+<", "><", re.sub(r"\s+", " ", html)).strip()


@pytest.mark.parametrize("claimed", ["", "me", "other"])
@pytest.mark.parametrize("assigned", ["", "me", "other"])
@pytest.mark.parametrize("frozen", [False, True])
@pytest.mark.parametrize("decide", [True, False])
def test_an_inbox_who_cell_is_what_the_who_template_rendered(
    django_user_model: Any, claimed: str, assigned: str, frozen: bool, decide: bool
) -> None:
    from common.models import Team
    from runs.selectors.claims import live_claim

    me = django_user_model.objects.create_user("me<&>", is_superuser=True)
    other = django_user_model.objects.create_user('o"ther', is_superuser=True)
    ticket = Ticket.objects.get(run=waiting_run("x"))
    people = {"me": me, "other": other}
    if claimed:
        ticket.claimed_by = people[claimed]
        ticket.claimed_until = timezone.now() + dt.timedelta(minutes=3)
    if assigned:
        ticket.assigned_to = people[assigned]
    ticket.tool_name = "<b>write</b>"
    ticket.frozen_team = Team(name="Red") if frozen else None  # type: ignore[attr-defined]
    claim = live_claim(ticket, me)
    context = {
        "t": ticket,
        "claim": claim,
        "user": me,
        "can": {"decide": decide},
        "deciders": [me, other],
        "target": "#inbox-list",
    }
    tag = '{% load ticket_claims %}{% ticket_who t claim deciders can.decide "#inbox-list" %}'
    new = Template(tag).render(Context(context))
    assert _blank(new) == _blank(Template(TEMPLATE_WHO).render(Context(context)))
    assert "me<&>" not in new and "<b>write" not in new  # escaped
