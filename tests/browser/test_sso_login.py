"""Single sign-on in a browser: the site's server (a separate process) talks to a real
OpenID Connect provider (oidc-provider-mock, on a thread of this process) through the
whole redirect flow; the user lands signed in with the team role of the claims and sees
that team's runs only, and logging out signs them out at the provider too."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import requests
from django.contrib.auth.models import User
from django.urls import reverse
from oidc_provider_mock import app as oidc_provider_app
from playwright.sync_api import expect
from werkzeug.http import dump_cookie, parse_cookie
from werkzeug.serving import make_server

from common.models import Membership
from runs.services.submission_flow import run_start
from tests.factories import scripted_agent, team
from tests.runs.helpers import drive

CLAIMS = {
    "email": "ada@example.com",
    "name": "Ada Lovelace",
    "groups": ["awaken:alpha:operator", "unrelated-group"],
}


@pytest.fixture
def live_server_url(provider: str, live_server_url: str) -> str:
    """The server, started after `provider` (its environment carries OIDC_*)."""
    return live_server_url


class ProviderSession:
    """What oidc-provider-mock lacks and real providers have, a sign-in session, as WSGI
    middleware around it: after the user authorizes, the provider's cookie remembers them
    and the next authorization request is granted without asking (the user is "still signed
    in there"); its end_session endpoint forgets them. `ended` records the hints the end
    session requests carried."""

    COOKIE = "provider_session"

    def __init__(self, app: Any) -> None:
        self.app = app
        self.ended: list[str] = []

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        path, method = environ.get("PATH_INFO", ""), environ["REQUEST_METHOD"]
        signed_in = parse_cookie(environ).get(self.COOKIE)
        if path == "/oauth2/authorize" and method == "GET" and signed_in:
            return self.app(_as_form_post(environ, {"sub": signed_in}), start_response)
        if path == "/oauth2/authorize" and method == "POST":
            form = _form(environ)
            if form.get("sub") and form.get("action") != "deny":
                cookie = dump_cookie(self.COOKIE, form["sub"], path="/", httponly=True)
                return self.app(environ, _with_cookie(start_response, cookie))
        if path == "/oauth2/end_session":
            self.ended.append(
                parse_qs(environ.get("QUERY_STRING", "")).get("id_token_hint", [""])[0]
            )
            cookie = dump_cookie(self.COOKIE, "", path="/", max_age=0)
            return self.app(environ, _with_cookie(start_response, cookie))
        return self.app(environ, start_response)


def _form(environ: dict[str, Any]) -> dict[str, str]:
    """The request's form fields; the body is put back for the app to read."""
    body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    environ["wsgi.input"] = io.BytesIO(body)
    return {key: values[0] for key, values in parse_qs(body.decode()).items()}


def _as_form_post(environ: dict[str, Any], fields: dict[str, str]) -> dict[str, Any]:
    body = urlencode(fields).encode()
    return {
        **environ,
        "REQUEST_METHOD": "POST",
        "CONTENT_TYPE": "application/x-www-form-urlencoded",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
    }


def _with_cookie(start_response: Any, cookie: str) -> Any:
    def start(status: str, headers: list[tuple[str, str]], *args: Any) -> Any:
        return start_response(status, [*headers, ("Set-Cookie", cookie)], *args)

    return start


@pytest.fixture
def provider_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, ProviderSession]]:
    """The provider (with its sign-in session) on a thread of this process, and the OIDC_*
    variables the site's server process starts with."""
    monkeypatch.setenv("AUTHLIB_INSECURE_TRANSPORT", "1")  # plain http on localhost
    sessions = ProviderSession(oidc_provider_app())
    server = make_server("localhost", 0, sessions, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1})
    thread.start()
    try:
        issuer = f"http://localhost:{server.server_port}"
        monkeypatch.setenv("OIDC_ISSUER", issuer)
        monkeypatch.setenv("OIDC_CLIENT_ID", "awaken-browser")
        monkeypatch.setenv("OIDC_CLIENT_SECRET", "s3cret")
        monkeypatch.setenv("OIDC_PROVIDER_NAME", "Example ID")
        yield issuer, sessions
    finally:
        server.shutdown()
        thread.join(5)
        server.server_close()


@pytest.fixture
def provider(provider_server: tuple[str, ProviderSession]) -> str:
    return provider_server[0]


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


def test_logging_out_signs_out_at_the_provider_too(
    provider_server: tuple[str, ProviderSession], new_page: Any
) -> None:
    """ "Log out" reaches the provider's end_session endpoint (no CSP refusal on the way),
    so the next "Sign in" asks the provider again instead of going straight through."""
    issuer, sessions = provider_server
    assert requests.put(f"{issuer}/users/ada", json=CLAIMS, timeout=10).status_code == 204
    page = new_page()
    page.goto("/login/")
    page.get_by_role("link", name="Sign in with Example ID").click()
    page.wait_for_url(f"{issuer}/oauth2/authorize?**")
    page.get_by_placeholder("sub").fill("ada")
    page.get_by_role("button", name="Authorize").click()
    expect(page.locator(".whoami")).to_contain_text("sso:ada")

    # the provider remembers ada: losing only the site's session signs her in at once
    page.context.clear_cookies(name="sessionid")
    page.goto("/login/")
    page.get_by_role("link", name="Sign in with Example ID").click()
    expect(page.locator(".whoami")).to_contain_text("sso:ada")

    page.get_by_role("button", name="Log out").click()
    page.wait_for_url(f"{issuer}/oauth2/end_session?**")
    assert len(sessions.ended) == 1 and sessions.ended[0].count(".") == 2  # the id token
    page.get_by_role("button", name="End session").click()
    page.wait_for_url("**/login/")  # the post-logout redirect URI
    expect(page.locator(".whoami")).to_have_count(0)

    page.get_by_role("link", name="Sign in with Example ID").click()
    page.wait_for_url(f"{issuer}/oauth2/authorize?**")
    expect(page.get_by_placeholder("sub")).to_be_visible()  # asked again
    expect(page.locator(".whoami")).to_have_count(0)
