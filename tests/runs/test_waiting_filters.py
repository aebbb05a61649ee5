"""Finding what waits: the runs list's "waiting on tool X for longer than N minutes" and
its "longest waiting first" sort, the inbox's age filter and sort, the same parameters
in the API, and query counts that do not grow with the rows."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs.models import Run, Ticket
from tests.factories import done_run
from tests.runs.bulk_helpers import age, calc, note, waiting_on

pytestmark = pytest.mark.django_db


def waiting_run(slug: str, call: tuple[str, dict[str, Any]], minutes: float) -> Run:
    (ticket,) = waiting_on(slug, call)
    age(ticket, minutes)
    return ticket.run


@pytest.fixture
def runs() -> dict[str, Run]:
    """Created in this order (so newest first is the reverse); ages of their tickets."""
    made = {
        "old_note": waiting_run("a1", note("x"), 60),
        "new_note": waiting_run("a2", note("y"), 10),
        "old_sum": waiting_run("a3", calc("1"), 90),
        "mid_note": waiting_run("a4", note("z"), 45),
    }
    done_run()
    return made


def run_rows(html: str) -> list[str]:
    return re.findall(r'id="run-row-([0-9a-f-]+)"', html)


def listed(client: Any, **params: Any) -> list[str]:
    response = client.get(reverse("runs:run-list"), params)
    assert response.status_code == 200
    return run_rows(response.content.decode())


def pks(runs: dict[str, Run], *names: str) -> list[str]:
    return [str(runs[name].pk) for name in names]


# --- the runs list -------------------------------------------------------------------------------


def test_runs_waiting_on_a_tool_for_longer_than_n_minutes(operator_client, runs):
    client = operator_client
    assert listed(client, waiting_tool="write_note") == pks(
        runs, "mid_note", "new_note", "old_note"
    )
    assert listed(client, waiting_tool="write_note", waiting_longer_than=30) == pks(
        runs, "mid_note", "old_note"
    )
    assert listed(client, waiting_longer_than=50) == pks(runs, "old_sum", "old_note")
    assert listed(client, waiting_tool="calculator", waiting_longer_than=120) == []
    assert listed(client, waiting_tool="send_email") == []
    # a bad number is left out, and the page says so (400)
    response = client.get(
        reverse("runs:run-list"), {"waiting_tool": "write_note", "waiting_longer_than": "soon"}
    )
    assert response.status_code == 400 and "whole minutes" in response.content.decode()
    assert len(run_rows(response.content.decode())) == 3


def test_longest_waiting_first(operator_client, runs):
    client = operator_client
    assert listed(client, waiting_tool="write_note", sort="longest_waiting") == pks(
        runs, "old_note", "mid_note", "new_note"
    )
    assert listed(client, waiting_longer_than=0, sort="longest_waiting") == pks(
        runs, "old_sum", "old_note", "mid_note", "new_note"
    )
    # without a waiting filter the sort does not apply: newest first, every run
    assert len(listed(client, sort="longest_waiting")) == 5


def test_decided_tickets_no_longer_count(operator_client, runs):
    from runs.services.tickets import decision_submit

    ticket = Ticket.objects.get(run=runs["old_note"], status="pending")
    decision_submit(ticket=ticket, action="approve")
    assert listed(operator_client, waiting_tool="write_note", waiting_longer_than=30) == pks(
        runs, "mid_note"
    )


def test_the_form_keeps_the_filters_and_offers_the_sort(operator_client, runs):
    html = operator_client.get(
        reverse("runs:run-list"),
        {"waiting_tool": "write_note", "waiting_longer_than": "30", "sort": "longest_waiting"},
    ).content.decode()
    assert 'name="waiting_tool" value="write_note"' in html
    assert 'name="waiting_longer_than" min="0" step="1" value="30"' in html
    assert '<option value="longest_waiting" selected>' in html
    assert '<option value="write_note">' in html  # the tools the agents offer
    assert 'data-prepend="false"' in html  # a filtered list is not prepended live


# --- the inbox -----------------------------------------------------------------------------------


def inbox_rows(client: Any, **params: Any) -> list[str]:
    html = client.get(reverse("runs:inbox"), params).content.decode()
    return re.findall(r'id="ticket-row-([0-9a-f-]+)"', html)


def ticket_pks(runs: dict[str, Run], *names: str) -> list[str]:
    return [str(Ticket.objects.get(run=runs[name]).pk) for name in names]


def test_the_inbox_filters_by_age_and_sorts_both_ways(operator_client, runs):
    client = operator_client
    oldest_first = ticket_pks(runs, "old_sum", "old_note", "mid_note", "new_note")
    assert inbox_rows(client) == oldest_first
    assert inbox_rows(client, sort="newest") == oldest_first[::-1]
    assert inbox_rows(client, waiting_longer_than=50) == ticket_pks(runs, "old_sum", "old_note")
    assert inbox_rows(client, waiting_longer_than=50, sort="newest") == ticket_pks(
        runs, "old_note", "old_sum"
    )
    html = client.get(reverse("runs:inbox"), {"waiting_longer_than": 50}).content.decode()
    assert "2 waiting, oldest first" in html
    assert 'data-refresh-url="/inbox/list?waiting_longer_than=50"' in html
    assert 'name="waiting_longer_than" value="50"' in html  # kept by the bulk form
    fragment = client.get(reverse("runs:inbox-list"), {"sort": "newest"}).content.decode()
    assert "4 waiting, newest first" in fragment
    html = client.get(reverse("runs:inbox"), {"waiting_longer_than": 500}).content.decode()
    assert "Nothing is waiting for a decision with these filters" in html


# --- the API -------------------------------------------------------------------------------------


def test_api_runs_waiting_filters_and_sort(operator_api, runs):
    def items(**params: Any) -> list[str]:
        response = operator_api.get("/api/v1/runs", params)
        assert response.status_code == 200, response.content
        return [item["run_id"] for item in response.json()["items"]]

    assert items(waiting_tool="write_note", waiting_longer_than=30) == pks(
        runs, "mid_note", "old_note"
    )
    assert items(waiting_longer_than=0, sort="longest_waiting") == pks(
        runs, "old_sum", "old_note", "mid_note", "new_note"
    )
    assert operator_api.get("/api/v1/runs", {"waiting_longer_than": -1}).status_code == 400
    assert operator_api.get("/api/v1/runs", {"sort": "sideways"}).status_code == 400


def test_api_longest_waiting_pages_through_every_run(operator_api, runs):
    seen: list[str] = []
    params: dict[str, Any] = {"waiting_longer_than": 0, "sort": "longest_waiting", "limit": 1}
    for _ in range(10):
        body = operator_api.get("/api/v1/runs", params).json()
        seen += [item["run_id"] for item in body["items"]]
        if not body["next_cursor"]:
            break
        params["cursor"] = body["next_cursor"]
    assert seen == pks(runs, "old_sum", "old_note", "mid_note", "new_note")


def test_api_tickets_waiting_longer_than(operator_api, runs):
    body = operator_api.get("/api/v1/tickets", {"waiting_longer_than": 40}).json()
    assert [item["id"] for item in body["items"]] == ticket_pks(
        runs, "old_sum", "old_note", "mid_note"
    )
    body = operator_api.get(
        "/api/v1/tickets", {"waiting_longer_than": 40, "tool": "write_note"}
    ).json()
    assert [item["id"] for item in body["items"]] == ticket_pks(runs, "old_note", "mid_note")


# --- query counts ---------------------------------------------------------------------------------


def count(client: Any, url: str, **params: Any) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url, params)
    assert response.status_code == 200, (url, response.content[:300])
    return len(queries)


PAGES = [
    ("/runs/", {"waiting_tool": "write_note", "waiting_longer_than": 5}),
    ("/runs/", {"waiting_tool": "write_note", "sort": "longest_waiting"}),
    ("/inbox/", {"waiting_longer_than": 5, "sort": "newest"}),
    ("/inbox/list", {"waiting_longer_than": 5}),
    ("/api/v1/runs", {"waiting_tool": "write_note", "sort": "longest_waiting"}),
    ("/api/v1/tickets", {"waiting_longer_than": 5}),
]


@pytest.mark.parametrize(("url", "params"), PAGES)
def test_query_counts_do_not_grow_with_the_rows(operator_client, operator_api, url, params):
    client = operator_api if url.startswith("/api/") else operator_client
    for index in range(2):
        waiting_run(f"s{index}", note(f"n{index}"), 30)
    count(client, url, **params)  # warm the process caches
    small = count(client, url, **params)
    for index in range(2, 12):
        waiting_run(f"s{index}", note(f"n{index}"), 30)
    assert count(client, url, **params) == small


def test_a_waiting_filter_costs_no_extra_query(operator_client, runs):
    count(operator_client, "/runs/")
    plain = count(operator_client, "/runs/")
    assert (
        count(operator_client, "/runs/", waiting_tool="write_note", waiting_longer_than=5) == plain
    )
    assert count(operator_client, "/runs/", waiting_longer_than=5, sort="longest_waiting") == plain
