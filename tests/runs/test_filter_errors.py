"""A bad filter on a list page or in the API is named with what is expected: the pages
answer 400 with the list and the message above it (the form keeps what was typed), the
API 400 with the field."""

from __future__ import annotations

import datetime as dt
import html
import uuid
from typing import Any

import pytest
from django.urls import reverse

from runs.selectors import encode_cursor
from runs.selectors.filters import SEARCH_MAX_CHARS
from tests.factories import done_run

pytestmark = pytest.mark.django_db

GARBAGE_CURSOR = "garbage"
WHEN = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
WRONG_ID_CURSOR = encode_cursor(WHEN, "not-an-id")  # well-formed, but no row has such an id


def page(client: Any, url: str, params: dict[str, str], status: int = 400) -> str:
    response = client.get(url, params)
    assert response.status_code == status, (url, params, response.status_code)
    return html.unescape(response.content.decode())


def error_block(text: str) -> str:
    start = text.index('class="flash error filter-errors"')
    return text[start : text.index("</div>", start)]


RUNS_LIST = [
    ("since", "notadate", "From (since)", "not a date"),
    ("until", "2026-13-45", "To (until)", "not a date"),
    ("waiting_longer_than", "abc", "for longer than (waiting_longer_than)", "whole minutes"),
    ("waiting_longer_than", "-5", "for longer than (waiting_longer_than)", "whole minutes"),
    ("cursor", GARBAGE_CURSOR, "Page link (cursor)", "not one this list made"),
    ("cursor", WRONG_ID_CURSOR, "Page link (cursor)", "not one this list made"),
    ("status", "bogus", "Status (status)", "is not one of created, running, waiting, done"),
    ("waiting_reason", "sleepy", "Waiting reason (waiting_reason)", "is not one of"),
    ("sort", "oldest", "Sort (sort)", "is not one of newest, longest_waiting"),
    ("thread", "notauuid", "Thread (thread)", "is not an id"),
    ("q", "x" * (SEARCH_MAX_CHARS + 1), "Search (q)", f"at most {SEARCH_MAX_CHARS} characters"),
]


@pytest.mark.parametrize(("name", "value", "label", "problem"), RUNS_LIST)
def test_a_bad_runs_list_filter_is_a_400_naming_it(operator_client, name, value, label, problem):
    done_run()
    text = page(operator_client, reverse("runs:run-list"), {name: value})
    message = error_block(text)
    assert label in message and problem in message, message
    assert 'id="run-row-' in text  # the list is there, without the bad filter


def test_the_runs_list_keeps_the_valid_filters_and_what_was_typed(operator_client):
    run = done_run()
    text = page(
        operator_client,
        reverse("runs:run-list"),
        {"status": "bogus", "since": "notadate", "q": str(run.pk)},
    )
    message = error_block(text)
    assert "Status (status)" in message and "From (since)" in message
    assert '"bogus"' in message and '"notadate"' in message
    assert 'name="since" value="notadate"' in text  # the form keeps the values
    assert f'name="q" value="{run.pk}"' in text
    assert f'id="run-row-{run.pk}"' in text  # the valid search still applies
    other = done_run()
    assert f'id="run-row-{other.pk}"' not in text


def test_a_bad_value_is_escaped_in_the_message(operator_client):
    response = operator_client.get(reverse("runs:run-list"), {"status": "<script>x</script>"})
    assert response.status_code == 400
    assert b"<script>x</script>" not in response.content
    assert b"&lt;script&gt;x&lt;/script&gt;" in response.content


def test_a_20k_search_is_a_400_page_saying_the_limit(operator_client):
    text = page(operator_client, reverse("runs:run-list"), {"q": "a" * 20_000})
    assert f"Search (q): at most {SEARCH_MAX_CHARS} characters, not 20000" in text


def test_good_filters_still_answer_200(operator_client):
    done_run()
    page(
        operator_client,
        reverse("runs:run-list"),
        {
            "status": "done",
            "since": "2020-01-01",
            "until": "2099-01-01T10:00",
            "waiting_longer_than": "",
            "sort": "",
            "thread": "",
        },
        status=200,
    )


@pytest.mark.parametrize(
    ("name", "value", "label"),
    [
        ("waiting_longer_than", "abc", "Waiting longer than (waiting_longer_than)"),
        ("cursor", GARBAGE_CURSOR, "Page link (cursor)"),
        ("sort", "sideways", "Sort (sort)"),
        ("who", "everyone", "Who (who)"),
    ],
)
def test_a_bad_inbox_filter_is_a_400_naming_it(operator_client, name, value, label):
    text = page(operator_client, reverse("runs:inbox"), {name: value})
    assert label in error_block(text)
    assert 'id="inbox-list"' in text
    partial = operator_client.get(reverse("runs:inbox-list"), {name: value})
    assert partial.status_code == 400  # a live refresh keeps the page (and its message)


def test_the_inbox_form_keeps_a_bad_age(operator_client):
    text = page(operator_client, reverse("runs:inbox"), {"waiting_longer_than": "abc"})
    assert 'name="waiting_longer_than" min="0" step="1" value="abc"' in text


@pytest.mark.parametrize(
    ("params", "label"),
    [
        ({"cursor": GARBAGE_CURSOR}, "Page link (cursor)"),
        ({"q": "t" * (SEARCH_MAX_CHARS + 1)}, "Search (q)"),
    ],
)
def test_a_bad_threads_list_filter_is_a_400_naming_it(operator_client, params, label):
    text = page(operator_client, reverse("runs:thread-list"), params)
    assert label in error_block(text)


@pytest.mark.parametrize(
    ("params", "label", "problem"),
    [
        ({"run": "notauuid"}, "Run (run)", '"notauuid" is not an id'),
        ({"cursor": GARBAGE_CURSOR}, "Page link (cursor)", "not one this list made"),
        ({"cursor": encode_cursor(WHEN, uuid.uuid4())}, "Page link (cursor)", "not one"),
        ({"action": "a" * 41}, "Action (action)", "at most 40 characters"),
    ],
)
def test_a_bad_audit_filter_is_a_400_naming_it(root_client, params, label, problem):
    text = page(root_client, reverse("runs:audit"), params)
    message = error_block(text)
    assert label in message and problem in message
    assert 'name="run" value="' in text


def test_the_audit_csv_with_a_bad_run_is_the_audit_page_saying_so(root_client):
    response = root_client.get(reverse("runs:audit-export"), {"run": "notauuid"})
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")
    assert "Run (run)" in html.unescape(response.content.decode())


def test_the_runs_csv_with_a_bad_date_is_the_runs_page_saying_so(operator_client):
    response = operator_client.get(reverse("runs:run-list-export"), {"since": "notadate"})
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")
    text = html.unescape(response.content.decode())
    assert "From (since)" in text
    assert 'action="/runs/"' in text  # the form filters the list, not the download


def test_a_good_audit_run_filter_still_filters(root_client):
    text = page(root_client, reverse("runs:audit"), {"run": str(uuid.uuid4())}, status=200)
    assert "Nothing recorded yet." in text


# --- the API says which field, with 400 ----------------------------------------------------


@pytest.mark.parametrize(
    ("url", "field"),
    [
        ("/api/v1/runs?created_after=notadate", "created_after"),
        ("/api/v1/runs?waiting_longer_than=abc", "waiting_longer_than"),
        ("/api/v1/runs?status=bogus", "status"),
        ("/api/v1/runs?q=" + "a" * (SEARCH_MAX_CHARS + 1), "q"),
        ("/api/v1/threads?q=" + "a" * (SEARCH_MAX_CHARS + 1), "q"),
        ("/api/v1/audit?run=notauuid", "run"),
        ("/api/v1/tickets?waiting_longer_than=abc", "waiting_longer_than"),
        ("/api/v1/tickets?status=bogus", "status"),
        ("/api/v1/runs/export.csv?created_after=notadate", "created_after"),
        ("/api/v1/audit/export.csv?run=notauuid", "run"),
    ],
)
def test_a_bad_api_filter_is_a_400_with_its_field(root_user, url, field):
    from tests.factories import bearer, token_for

    response = bearer(token_for(root_user, "t")).get(url)
    assert response.status_code == 400
    assert field in response.json()["error"]["details"]


@pytest.mark.parametrize("path", ["/api/v1/runs", "/api/v1/tickets", "/api/v1/threads"])
def test_a_bad_api_cursor_is_a_400(root_user, path):
    from tests.factories import bearer, token_for

    api = bearer(token_for(root_user, "t"))
    for cursor in (GARBAGE_CURSOR, WRONG_ID_CURSOR):
        response = api.get(path, {"cursor": cursor})
        assert response.status_code == 400, (path, cursor)
        assert response.json()["error"]["details"] == {"cursor": cursor}
