"""The list pages' own forms and filters: the saved-view forms and the inbox's bulk form
show their errors inside the form (what was typed kept), a NUL or a bad window in a list's
query string is a filter error above the list (the API keeps its JSON `parse_error`), a
saved view is never saved with bad filters, and a frozen team's inbox rows show the
freeze before the click."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.urls import reverse

from runs.accounts.models.saved_views import SavedView
from runs.models import Decision
from tests.factories import done_run, team_member
from tests.runs.test_page_form_errors import form_of, freeze, ticket_of, waiting

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


def error_block(text: str) -> str:
    start = text.index('class="flash error filter-errors"')
    return text[start : text.index("</div>", start)]


@pytest.fixture
def operator(client):
    client.force_login(team_member("operator", "red", "opa"))
    return client


# --- a NUL in a list's query string ---------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "params", "label"),
    [
        ("/runs/", "q=ab%00c", "Search (q)"),
        ("/runs/", "since=%00", "From (since)"),
        ("/inbox/", "tool=write%00note", "Tool (tool)"),
        ("/threads/", "q=%00", "Search (q)"),
        ("/runs/", "%00=1", 'Parameter "\ufffd"'),
        ("/audit/", "actor=a%00b", "Actor (actor)"),
    ],
)
def test_a_nul_in_a_list_filter_is_a_400_list_page_naming_the_filter(operator, url, params, label):
    done_run()
    response = operator.get(f"{url}?{params}")
    assert response.status_code == 400
    text = unescape(response.content.decode())
    message = error_block(text)
    assert label in message and "NUL" in message, message
    assert "\x00" not in text


def test_a_nul_in_the_runs_list_still_lists_the_runs_and_the_api_keeps_its_json(
    operator_client,
):
    done_run()
    response = operator_client.get("/runs/?q=%00")
    assert response.status_code == 400 and 'id="run-row-' in response.content.decode()
    partial = operator_client.get("/inbox/list?agent=%00")  # the inbox's refresh
    assert partial.status_code == 400 and b"NUL" not in partial.content
    save = form_of(response.content.decode(), reverse("runs:saved-view-save", args=["runs"]))
    assert 'name="query" value=""' in save  # "Save this view" saves the list shown
    api = operator_client.get("/api/v1/runs?q=%00")
    assert api.status_code == 400 and api.json()["error"]["code"] == "parse_error"


# --- the dashboard's window -------------------------------------------------------------------


def test_a_bad_dashboard_window_is_a_400_with_the_dashboard_and_a_message(operator):
    response = operator.get("/?window=fortnight")
    assert response.status_code == 400
    text = unescape(response.content.decode())
    message = error_block(text)
    assert "(window)" in message and '"fortnight" is not one of' in message
    assert 'id="glance"' in text  # the dashboard is there, on its default window
    assert operator.get("/?window=7d").status_code == 200
    glance = operator.get(reverse("runs:dashboard-glance") + "?window=%3Cb%3E")
    assert glance.status_code == 400 and "&lt;b&gt;" in glance.content.decode()


# --- saved views ------------------------------------------------------------------------------


def save_url(page: str) -> str:
    return reverse("runs:saved-view-save", args=[page])


@pytest.mark.parametrize("htmx", [False, True], ids=["form", "htmx"])
def test_saving_a_view_with_bad_filters_is_refused_inside_the_save_form(operator, htmx):
    url = save_url("runs")
    response = operator.post(
        url, {"name": "broken", "query": "status=bogus&agent=a"}, **(HX if htmx else {})
    )
    assert response.status_code == 400
    form = form_of(response.content.decode(), url)
    assert 'class="flash error form-error"' in form and "Status (status)" in form
    assert '"bogus" is not one of' in form and 'value="broken"' in form  # the name kept
    assert not SavedView.objects.exists()


def test_saving_an_inbox_view_with_a_bad_age_is_refused_inside_the_save_form(operator):
    url = save_url("inbox")
    response = operator.post(url, {"name": "old", "query": "waiting_longer_than=abc"})
    assert response.status_code == 400
    form = form_of(response.content.decode(), url)
    assert "Waiting longer than (waiting_longer_than)" in form
    assert not SavedView.objects.exists()


def test_a_nul_or_no_name_in_the_save_form_is_said_inside_it_with_what_was_typed(operator):
    url = save_url("inbox")
    response = operator.post(url, {"name": "mi\x00ne", "query": "tool=write_note"})
    assert response.status_code == 400
    form = form_of(response.content.decode(), url)
    assert "NUL" in form and 'value="mi\ufffdne"' in form
    response = operator.post(url, {"name": "  ", "query": "tool=write_note"})
    assert response.status_code == 400
    assert "Give the view a name." in form_of(response.content.decode(), url)
    assert not SavedView.objects.exists()


def test_a_nul_in_the_delete_form_is_said_inside_it_and_nothing_is_deleted(operator):
    operator.post(save_url("runs"), {"name": "mine", "query": "status=done"})
    view = SavedView.objects.get()
    url = reverse("runs:saved-view-delete", args=[view.pk])
    response = operator.post(url, {"query": "q=\x00"})
    assert response.status_code == 400
    assert "NUL" in form_of(response.content.decode(), url)
    assert SavedView.objects.filter(pk=view.pk).exists()


# --- the inbox's bulk form --------------------------------------------------------------------


def test_a_bulk_form_without_a_selection_is_400_inside_it(operator):
    waiting()
    response = operator.post("/inbox/bulk", {"action": "approve", "tool": "write_note"}, **HX)
    assert response.status_code == 400
    assert response["HX-Retarget"] == "#inbox-list"
    form = form_of(response.content.decode(), "/inbox/bulk")
    assert "Select at least one ticket." in form and 'name="tool" value="write_note"' in form


def test_a_nul_in_the_bulk_form_is_400_inside_it_with_the_selection_kept(operator):
    ticket = ticket_of(waiting())
    form = {"action": "appro\x00ve", "ticket": str(ticket.pk)}
    response = operator.post("/inbox/bulk", form)
    assert response.status_code == 400
    html = response.content.decode()
    bulk = form_of(html, "/inbox/bulk")
    assert "NUL" in bulk
    assert re.search(rf'value="{ticket.pk}"[^>]* checked', bulk), bulk


@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "form"])
def test_a_frozen_teams_bulk_confirm_is_409_inside_the_confirm_form_with_the_reason_kept(
    operator, htmx
):
    ticket = ticket_of(waiting())
    freeze()
    form = {"action": "reject", "ticket": str(ticket.pk), "confirm": "1", "comment": "too late"}
    response = operator.post("/inbox/bulk", form, **(HX if htmx else {}))
    assert response.status_code == 409
    if htmx:
        assert response["HX-Retarget"] == "#inbox-confirm"
    confirm = form_of(response.content.decode(), "/inbox/bulk", "reject")
    assert 'data-error-code="team_frozen"' in confirm and 'value="too late"' in confirm
    assert 'name="confirm" value="1"' in confirm
    assert not Decision.objects.exists()


# --- a frozen team's inbox rows ---------------------------------------------------------------


def test_a_frozen_teams_inbox_rows_show_the_freeze_and_their_controls_disabled(operator):
    ticket = ticket_of(waiting())
    html = operator.get("/inbox/").content.decode()
    row = html[html.index(f'id="ticket-row-{ticket.pk}"') :]
    row = row[: row.index("</tr>")]
    assert "disabled" not in row
    freeze()
    html = unescape(operator.get("/inbox/").content.decode())
    row = html[html.index(f'id="ticket-row-{ticket.pk}"') :]
    row = row[: row.index("</tr>")]
    assert "data-frozen" in row and "Team Red is frozen" in row
    assert re.search(r'name="ticket" value="[^"]+" disabled', row), row
    assert re.search(r"<button[^>]*\bdisabled\b[^>]*>Claim</button>", row), row
