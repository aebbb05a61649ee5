"""Saved views: saving a page's filters (normalised), listing them as links, replacing by
name, deleting, each user seeing only their own; and the /api/v1/saved-views API."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs.accounts.models.saved_views import SavedView
from runs.accounts.services.saved_views import normalised_query
from tests.factories import user_with_role

pytestmark = pytest.mark.django_db


def save(client: Client, page: str, name: str, query: str) -> Any:
    url = reverse("runs:saved-view-save", args=[page])
    return client.post(url, {"name": name, "query": query})


def test_normalised_query_keeps_only_the_pages_filters():
    raw = "cursor=abc&bogus=1&agent=&status=waiting&waiting_longer_than=30&q=+lunch+"
    assert normalised_query("runs", raw) == "status=waiting&q=lunch&waiting_longer_than=30"
    assert normalised_query("inbox", raw) == "waiting_longer_than=30"
    assert normalised_query("inbox", "who=mine&tool=write_note&sort=newest&status=x") == (
        "tool=write_note&sort=newest&who=mine"
    )
    assert normalised_query("elsewhere", raw) == ""


def test_save_a_runs_view_then_find_it_on_the_page(operator_client):
    response = save(operator_client, "runs", "stuck notes", "waiting_tool=write_note&cursor=x")
    assert response.status_code == 302
    assert response["Location"] == "/runs/?waiting_tool=write_note"
    view = SavedView.objects.get()
    assert (view.page, view.name, view.query, view.user.username) == (
        "runs",
        "stuck notes",
        "waiting_tool=write_note",
        "alice",
    )
    html = operator_client.get(response["Location"]).content.decode()
    assert "Saved the view “stuck notes”." in html
    assert (
        '<a href="/runs/?waiting_tool=write_note" title="stuck notes" aria-current="true">'
        "stuck notes</a>"
    ) in html
    assert 'name="query" value="waiting_tool=write_note"' in html  # what "Save" would save
    # the inbox has its own views
    assert "stuck notes" not in operator_client.get(reverse("runs:inbox")).content.decode()


def test_the_same_name_replaces_the_filters(operator_client):
    save(operator_client, "inbox", "mine", "agent=a")
    save(operator_client, "inbox", "mine", "agent=b&sort=newest")
    assert list(SavedView.objects.values_list("name", "query")) == [("mine", "agent=b&sort=newest")]
    html = operator_client.get(reverse("runs:inbox")).content.decode()
    assert 'href="/inbox/?agent=b&amp;sort=newest"' in html


def test_a_name_is_required_and_the_page_must_exist(operator_client):
    response = save(operator_client, "runs", "   ", "status=done")
    assert response.status_code == 400  # the runs page, the message inside the save form
    assert "Give the view a name." in response.content.decode()
    assert 'name="query" value="status=done"' in response.content.decode()
    assert save(operator_client, "threads", "x", "").status_code == 404
    assert not SavedView.objects.exists()


def test_only_the_owner_sees_and_deletes_a_view(operator_client):
    save(operator_client, "runs", "alice's", "status=waiting")
    view = SavedView.objects.get()
    client = Client()
    client.force_login(user_with_role("operator", "bert"))
    assert "alice&#x27;s" not in client.get(reverse("runs:run-list")).content.decode()
    delete = reverse("runs:saved-view-delete", args=[view.pk])
    assert client.post(delete).status_code == 404
    assert SavedView.objects.filter(pk=view.pk).exists()

    response = operator_client.post(delete, {"query": "status=done&cursor=x"})
    assert response.status_code == 302 and response["Location"] == "/runs/?status=done"
    assert not SavedView.objects.exists()
    assert operator_client.post(delete).status_code == 404


def test_a_viewer_may_keep_views_and_posts_need_a_login(viewer_client):
    assert save(viewer_client, "inbox", "mine", "tool=x").status_code == 302
    assert SavedView.objects.get().user.username == "viewer"
    assert viewer_client.get(reverse("runs:saved-view-save", args=["inbox"])).status_code == 405
    anonymous = Client()
    response = save(anonymous, "runs", "x", "")
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_names_are_escaped(operator_client):
    save(operator_client, "runs", "<script>alert(1)</script>", "q=<b>")
    html = operator_client.get(reverse("runs:run-list")).content.decode()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_the_pages_query_count_does_not_grow_with_saved_views(operator_client):
    save(operator_client, "runs", "v0", "status=done")
    for page in ("/runs/", "/inbox/"):
        operator_client.get(page)
    counts = {}
    for page in ("/runs/", "/inbox/"):
        with CaptureQueriesContext(connection) as queries:
            operator_client.get(page)
        counts[page] = len(queries)
    for index in range(1, 10):
        save(operator_client, "runs", f"v{index}", f"status=done&q={index}")
        save(operator_client, "inbox", f"v{index}", f"tool=t{index}")
    for page in ("/runs/", "/inbox/"):
        with CaptureQueriesContext(connection) as queries:
            html = operator_client.get(page).content.decode()
        assert len(queries) == counts[page], page
        assert html.count("Delete saved view v") >= 9


# --- the API -------------------------------------------------------------------------------------


def test_api_lists_creates_replaces_and_deletes_own_views(operator_api, operator_user, viewer_api):
    response = operator_api.post(
        "/api/v1/saved-views",
        {"page": "runs", "name": "old notes", "query": "waiting_tool=write_note&cursor=abc"},
        format="json",
    )
    assert response.status_code == 201, response.content
    created = response.json()
    assert created["query"] == "waiting_tool=write_note" and created["page"] == "runs"
    again = operator_api.post(
        "/api/v1/saved-views",
        {"page": "runs", "name": "old notes", "query": "waiting_longer_than=60"},
        format="json",
    )
    assert again.status_code == 200 and again.json()["id"] == created["id"]
    operator_api.post(
        "/api/v1/saved-views", {"page": "inbox", "name": "new", "query": ""}, format="json"
    )

    items = operator_api.get("/api/v1/saved-views").json()["items"]
    assert [(i["page"], i["name"], i["query"]) for i in items] == [
        ("inbox", "new", ""),
        ("runs", "old notes", "waiting_longer_than=60"),
    ]
    only = operator_api.get("/api/v1/saved-views", {"page": "inbox"}).json()["items"]
    assert [i["name"] for i in only] == ["new"]

    assert viewer_api.get("/api/v1/saved-views").json()["items"] == []  # not theirs
    assert viewer_api.delete(f"/api/v1/saved-views/{created['id']}").status_code == 404
    assert operator_api.delete(f"/api/v1/saved-views/{created['id']}").status_code == 204
    assert operator_api.delete(f"/api/v1/saved-views/{created['id']}").status_code == 404
    assert SavedView.objects.filter(user=operator_user).count() == 1


@pytest.mark.parametrize(
    "body",
    [
        {"page": "threads", "name": "x", "query": ""},
        {"page": "runs", "name": "", "query": ""},
        {"page": "runs", "name": "   ", "query": ""},
        {"page": "runs", "name": "x" * 101, "query": ""},
        {"page": "runs"},
    ],
)
def test_api_refuses_bad_views(operator_api, body):
    response = operator_api.post("/api/v1/saved-views", body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "invalid"
    assert not SavedView.objects.exists()


def test_api_needs_authentication(anonymous_api):
    assert anonymous_api.get("/api/v1/saved-views").status_code == 401
    assert anonymous_api.delete("/api/v1/saved-views/1").status_code == 401
