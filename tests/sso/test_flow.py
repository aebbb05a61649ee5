"""The login page, the local login modes and the OpenID Connect code flow against a real
provider (oidc-provider-mock on a thread), driven with Django's test client."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from common.models import Membership
from tests.factories import superuser, team, user_with_role
from tests.processes import free_port

pytestmark = pytest.mark.django_db


def _messages(response: Any) -> str:
    return " ".join(str(m) for m in response.context["messages"])


def _start(client: Client, issuer: str) -> str:
    """Starts a sign-in; returns the provider's authorization URL it redirected to."""
    response = client.get(reverse("oidc_authentication_init"), {"next": "/runs/"})
    assert response.status_code == 302
    assert response["Location"].startswith(f"{issuer}/oauth2/authorize?")
    return response["Location"]


def _authorize(url: str, **form: str) -> str:
    """Submits the provider's authorization form; returns the site path it sends back to."""
    answer = requests.post(url, data=form, allow_redirects=False, timeout=10)
    assert answer.status_code == 302, answer.text
    location = urlsplit(answer.headers["Location"])
    assert location.path == reverse("oidc_authentication_callback")
    return f"{location.path}?{location.query}"


# --- the login page ----------------------------------------------------------------------


def test_without_an_issuer_the_page_has_only_the_password_form(client: Client):
    page = client.get(reverse("login")).content.decode()
    assert "Sign in with" not in page and 'name="password"' in page
    assert client.get(reverse("oidc_authentication_init")).status_code == 404
    assert client.get(reverse("oidc_authentication_callback")).status_code == 404


def test_the_page_offers_the_provider_while_the_provider_is_down(client: Client, settings):
    settings.OIDC_ISSUER = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    settings.OIDC_CLIENT_ID = "awaken"
    settings.OIDC_PROVIDER_NAME = "<Acme & Co>"
    response = client.get(reverse("login"), {"next": "/runs/?a=1&b=2"})
    page = response.content.decode()
    assert response.status_code == 200
    assert "Sign in with &lt;Acme &amp; Co&gt;" in page
    assert reverse("oidc_authentication_init") + "?next=/runs/%3Fa%3D1%26b%3D2" in page
    assert 'name="password"' in page


def test_a_provider_that_cannot_be_reached_gives_a_clear_message(client: Client, settings):
    settings.OIDC_ISSUER = f"http://127.0.0.1:{free_port()}"
    settings.OIDC_CLIENT_ID = "awaken"
    response = client.get(reverse("oidc_authentication_init"), follow=True)
    assert response.status_code == 200
    assert response.redirect_chain[-1][0] == reverse("login")
    assert "Single sign-on is unavailable" in _messages(response)
    assert settings.OIDC_ISSUER in response.content.decode()


# --- local login modes -------------------------------------------------------------------


def _password_login(client: Client, username: str) -> Any:
    return client.post(reverse("login"), {"username": username, "password": "pw"})


def test_local_login_on_lets_everyone_in(client: Client, provider):
    user_with_role("operator", "olga")
    assert _password_login(client, "olga").status_code == 302


def test_break_glass_mode_lets_only_superusers_use_passwords(client: Client, settings, provider):
    settings.AWAKEN_LOCAL_LOGIN = "superusers"
    user_with_role("admin", "adam")
    superuser("root")
    page = client.get(reverse("login")).content.decode()
    assert "Break-glass sign-in (superusers only)" in page and "Sign in with Example ID" in page
    refused = _password_login(client, "adam")
    assert refused.status_code == 200
    assert "only break-glass superuser accounts may" in refused.content.decode()
    assert "_auth_user_id" not in client.session
    assert not Client().login(username="adam", password="pw")  # the admin's form too
    admin_form = Client().post("/admin/login/", {"username": "adam", "password": "pw"})
    assert admin_form.status_code == 200
    assert _password_login(client, "root").status_code == 302


def test_local_login_off_hides_the_form_and_refuses_passwords(client: Client, settings, provider):
    settings.AWAKEN_LOCAL_LOGIN = "off"
    superuser("root")
    page = client.get(reverse("login")).content.decode()
    assert 'name="password"' not in page and "Sign in with Example ID" in page
    refused = _password_login(client, "root")
    assert refused.status_code == 200
    assert "Password sign-in is turned off" in refused.content.decode()
    assert "_auth_user_id" not in client.session
    assert not Client().login(username="root", password="pw")


# --- the code flow -------------------------------------------------------------------------


def test_the_code_flow_signs_in_with_the_roles_of_the_claims(client: Client, provider):
    team("alpha")
    claims = {
        "email": "ada@example.com",
        "name": "Ada Lovelace",
        "groups": ["awaken:alpha:operator", "awaken:viewer", "awaken:beta:bogus"],
    }
    assert requests.put(f"{provider}/users/ada", json=claims, timeout=10).status_code == 204
    callback = _authorize(_start(client, provider), sub="ada")
    response = client.get(callback)
    assert response.status_code == 302 and response["Location"] == "/runs/"
    user = User.objects.get(username="sso:ada")
    assert int(client.session["_auth_user_id"]) == user.pk
    assert (user.email, user.first_name, user.last_name) == ("ada@example.com", "Ada", "Lovelace")
    membership = Membership.objects.get(user=user)
    assert (membership.team.slug, membership.role, membership.source) == (
        "alpha",
        "operator",
        "sso",
    )
    assert set(user.groups.values_list("name", flat=True)) == {"viewer"}
    page = client.get("/runs/").content.decode()
    assert "sso:ada" in page

    # the same code again (a replay) does not sign anyone in
    replay = Client().get(callback, follow=True)
    assert "unknown or has expired" in _messages(replay)

    # next login: the provider dropped the team role; the membership goes
    requests.put(f"{provider}/users/ada", json={"groups": []}, timeout=10)
    second = Client()
    assert second.get(_authorize(_start(second, provider), sub="ada")).status_code == 302
    assert not Membership.objects.filter(user=user).exists()
    assert User.objects.filter(username="sso:ada").count() == 1


def test_logout_ends_the_session_and_goes_to_the_providers_logout(client: Client, provider):
    client.get(_authorize(_start(client, provider), sub="bob"))
    assert "_auth_user_id" in client.session
    response = client.post(reverse("logout"))
    # a page of the site sends the browser on: a redirect answering the form's POST would
    # be refused by the pages' CSP form-action 'self' (tests/browser/test_sso_login.py)
    assert response.status_code == 200 and "no-store" in response["Cache-Control"]
    page = response.content.decode()
    target = f"{provider}/oauth2/end_session?id_token_hint="
    assert f'<meta http-equiv="refresh" content="0; url={target}' in page
    assert f'href="{target}' in page
    assert "&amp;post_logout_redirect_uri=http%3A%2F%2Ftestserver%2Flogin%2F" in page
    assert "_auth_user_id" not in client.session


def test_a_denied_sign_in_shows_the_providers_answer(client: Client, provider):
    callback = _authorize(_start(client, provider), action="deny")
    assert "error=access_denied" in callback
    response = client.get(callback, follow=True)
    assert response.redirect_chain[-1][0] == reverse("login")
    assert "Sign-in was denied at the identity provider." in _messages(response)
    assert "_auth_user_id" not in client.session


def test_hostile_or_unknown_callbacks_give_a_message_not_an_error(client: Client, provider):
    hostile = client.get(
        reverse("oidc_authentication_callback"),
        {"error": "<script>x</script>", "error_description": "<img src=x onerror=alert(1)>"},
        follow=True,
    )
    page = hostile.content.decode()
    assert hostile.status_code == 200
    assert "&lt;img src=x onerror=alert(1)&gt;" in page and "<img src=x" not in page
    assert "&lt;script&gt;x&lt;/script&gt;" in page
    for query in ({"code": "abc", "state": "forged"}, {"code": "abc"}, {}):
        response = client.get(reverse("oidc_authentication_callback"), query, follow=True)
        assert response.status_code == 200
        assert "unknown or has expired" in _messages(response)


def test_a_tampered_code_is_refused_by_the_provider_with_a_message(client: Client, provider):
    callback = _authorize(_start(client, provider), sub="eve")
    response = client.get(callback.replace("code=", "code=x"), follow=True)
    assert response.status_code == 200
    assert "could not be verified" in _messages(response)
    assert not User.objects.filter(username="sso:eve").exists()


def test_a_client_id_the_id_token_is_not_for_is_refused(client: Client, settings, provider):
    url = _start(client, provider)
    callback = _authorize(url, sub="mallory")
    settings.OIDC_CLIENT_ID = "another-client"  # the token's audience is awaken-test
    response = client.get(callback, follow=True)
    assert "could not be verified" in _messages(response)
    assert not User.objects.filter(username="sso:mallory").exists()
