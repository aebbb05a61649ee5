"""A NUL character in a query string or a form field is a 400, never a 500 from the
database (PostgreSQL refuses NUL in text)."""

from __future__ import annotations

import pytest

from tests.factories import user_with_role

pytestmark = pytest.mark.django_db

PAGES = [
    "/runs/?agent=%00",
    "/runs/?q=%00",
    "/threads/?q=%00",
    "/audit/?action=%00",
    "/audit/?actor=a%00b",
    "/inbox/?tool=%00",
    "/inbox/?agent=%00",
    "/runs/?%00=1",
]


@pytest.fixture
def admin_role_client(client):
    """The test client logged in as a user in the admin role (not a superuser)."""
    client.force_login(user_with_role("admin", "olga"))
    return client


@pytest.mark.parametrize("url", PAGES)
def test_a_nul_in_a_filter_is_a_400(admin_role_client, url):
    response = admin_role_client.get(url)
    assert response.status_code == 400
    assert b"NUL" in response.content


def test_a_nul_in_a_form_field_is_a_400(admin_role_client):
    response = admin_role_client.post("/threads/new", {"agent": "a\x00", "message": "hi"})
    assert response.status_code == 400


def test_a_nul_in_an_api_query_is_the_json_error(admin_role_client):
    response = admin_role_client.get("/api/v1/runs?agent_id=%00")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "parse_error"


def test_ordinary_values_pass(admin_role_client):
    assert admin_role_client.get("/runs/?q=lunch").status_code == 200
