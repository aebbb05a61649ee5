"""Single sign-on in a browser: the site's server (a separate process) talks to a real
OpenID Connect provider (oidc-provider-mock, on a thread of this process) through the
whole redirect flow; the user lands signed in with the team role of the claims and sees
that team's runs only."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from django.contrib.auth.models import User
from django.urls import reverse
from oidc_provider_mock import run_server_in_thread
from playwright.sync_api import expect

from common.models import Membership
from runs.services.runs import run_start
from tests.factories import scripted_agent, team
from tests.runs.helpers import drive

CLAIMS = {
    "email": "ada@example.com",
    "name": "Ada Lovelace",
    "groups": ["awaken:alpha:operator", "unrelated-group"],
}


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The provider, and the OIDC_* variables the site's server process starts with."""
    monkeypatch.setenv("AUTHLIB_INSECURE_TRANSPORT", "1")  # plain http on localhost
    with run_server_in_thread() as server:
        issuer = f"http://localhost:{server.server_port}"
        monkeypatch.setenv("OIDC_ISSUER", issuer)
        monkeypatch.setenv("OIDC_CLIENT_ID", "awaken-browser")
        monkeypatch.setenv("OIDC_CLIENT_SECRET", "s3cret")
        monkeypatch.setenv("OIDC_PROVIDER_NAME", "Example ID")
        yield issuer


@pytest.fixture
def live_server_url(provider: str, live_server_url: str) -> str:
    """The server, started after `provider` (its environment carries OIDC_*)."""
    return live_server_url


def _team_run(slug: str) -> Any:
    agent = scripted_agent([{"text": f"{slug} answer"}], team=team(slug), slug=f"{slug}-agent")
    return drive(run_start(agent=agent, messages=f"hello {slug}"))


def test_sign_in_through_the_provider_grants_the_claimed_team_role(
    provider: str, new_page: Any
) -> None:
    alpha_run, beta_run = _team_run("alpha"), _team_run("beta")
    answer = requests.put(f"{provider}/users/ada", json=CLAIMS, timeout=10)
    assert answer.status_code == 204

    page = new_page()
    page.goto("/login/")
    page.get_by_role("link", name="Sign in with Example ID").click()
    page.wait_for_url(f"{provider}/oauth2/authorize?**")
    page.get_by_placeholder("sub").fill("ada")
    page.get_by_role("button", name="Authorize").click()

    page.wait_for_url("**/")  # back on the site: the dashboard
    expect(page.locator(".whoami")).to_contain_text("sso:ada")
    assert urlsplit(page.url).path == reverse("runs:dashboard")
    user = User.objects.get(username="sso:ada")
    assert user.email == "ada@example.com"
    membership = Membership.objects.get(user=user)
    assert (membership.team.slug, membership.role, membership.source) == (
        "alpha",
        "operator",
        "sso",
    )
    assert not user.groups.exists() and not user.is_staff

    page.goto("/runs/")
    expect(page.locator(f"a[href='/runs/{alpha_run.pk}/']").first).to_be_visible()
    assert page.locator(f"a[href='/runs/{beta_run.pk}/']").count() == 0

    api = page.request.get("/api/v1/runs")  # the browser's session, no token
    assert api.status == 200
    body = api.text()
    assert str(alpha_run.pk) in body
    assert str(beta_run.pk) not in body
    beta_detail = page.request.get(f"/api/v1/runs/{beta_run.pk}")
    assert beta_detail.status == 404


def test_a_denied_sign_in_lands_on_the_login_page_with_a_message(
    provider: str, new_page: Any
) -> None:
    page = new_page()
    page.goto("/login/")
    page.get_by_role("link", name="Sign in with Example ID").click()
    page.get_by_role("button", name="Deny").click()
    page.wait_for_url("**/login/")
    expect(page.locator(".flash.error")).to_contain_text(
        "Sign-in was denied at the identity provider."
    )
    expect(page.locator(".whoami")).to_have_count(0)
