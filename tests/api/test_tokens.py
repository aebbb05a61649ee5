"""Personal API tokens: created on the "API tokens" page or by `create_api_token`, shown
once, stored hashed, used as Bearer, last use recorded, expiry honoured, revocable."""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from common.api import tokens as token_module
from common.models import ApiToken, AuditEntry
from tests.api.helpers import assert_error
from tests.factories import bearer, token_for, user_with_role

pytestmark = pytest.mark.django_db

RUNS = "/api/v1/runs"


def test_token_lifecycle(operator_user):
    raw = token_for(operator_user, "ci")
    token = ApiToken.objects.get()
    assert raw.startswith(f"{token.prefix}_") and token.prefix.startswith("awk_")
    assert token.token_hash == hashlib.sha256(raw.encode()).hexdigest()
    stored = json.dumps(list(ApiToken.objects.values()), default=str)
    assert raw.split("_", 2)[2] not in stored  # the secret is nowhere in the table
    assert token.last_used_at is None

    client = bearer(raw)
    assert client.get(RUNS).status_code == 200
    token.refresh_from_db()
    first_use = token.last_used_at
    assert first_use is not None

    # within the granularity window the row is not rewritten on every request
    assert client.get(RUNS).status_code == 200
    token.refresh_from_db()
    assert token.last_used_at == first_use
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=first_use - dt.timedelta(minutes=5))
    token_module.token_cache.clear()  # as a restarted process (the cache holds the old time)
    assert client.get(RUNS).status_code == 200
    token.refresh_from_db()
    assert token.last_used_at > first_use - dt.timedelta(minutes=5)

    # a wrong secret with the right prefix is refused
    forged = f"{token.prefix}_{'A' * 43}"
    assert_error(bearer(forged).get(RUNS), 401, "authentication_failed")

    token_module.token_revoke(token=token, actor=token_module.Actor(label="test"))
    assert_error(client.get(RUNS), 401, "authentication_failed")


def test_expired_token_is_refused(operator_user):
    raw = token_for(operator_user, "short", expires_at=timezone.now() + dt.timedelta(hours=1))
    client = bearer(raw)
    assert client.get(RUNS).status_code == 200
    ApiToken.objects.update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    token_module.token_cache.clear()  # an update() elsewhere shows within the cache's TTL
    assert_error(client.get(RUNS), 401, "authentication_failed")


def test_token_of_an_inactive_user_is_refused(operator_user):
    client = bearer(token_for(operator_user))
    operator_user.is_active = False
    operator_user.save()
    assert_error(client.get(RUNS), 401, "authentication_failed")


def test_token_acts_with_its_users_current_permissions(viewer_user):
    client = bearer(token_for(viewer_user))
    assert_error(client.post(RUNS, {}, format="json"), 403, "permission_denied")
    viewer_user.groups.clear()
    assert_error(client.get(RUNS), 403, "permission_denied")


def test_create_rejects_bad_input(operator_user):
    actor = token_module.Actor(label="t")
    with pytest.raises(token_module.InvalidInput):
        token_module.token_create(user=operator_user, name="  ", actor=actor)
    with pytest.raises(token_module.InvalidInput):
        token_module.token_create(user=operator_user, name="x" * 101, actor=actor)
    with pytest.raises(token_module.InvalidInput):
        token_module.token_create(
            user=operator_user,
            name="old",
            expires_at=timezone.now() - dt.timedelta(days=1),
            actor=actor,
        )
    assert not ApiToken.objects.exists()


# --- the page ------------------------------------------------------------------------------------


def test_tokens_page_creates_shows_once_and_revokes(client):
    user = user_with_role("viewer", "vera")
    client.force_login(user)
    url = reverse("runs:tokens")
    page = client.get(url)
    assert page.status_code == 200 and b"No tokens yet" in page.content

    created = client.post(url, {"name": "laptop <b>", "expires_days": "30"})
    assert created.status_code == 200
    assert created["Cache-Control"] == "no-store"
    token = ApiToken.objects.get(user=user)
    assert token.name == "laptop <b>"
    assert token.expires_at is not None and token.expires_at > timezone.now() + dt.timedelta(
        days=29
    )
    html = created.content.decode()
    raw = html.split('aria-label="new token"')[0].rsplit('value="', 1)[1].split('"')[0]
    assert raw.startswith(token.prefix + "_")
    assert "laptop &lt;b&gt;" in html and "laptop <b>" not in html

    # the token works with the API, and the page never shows the secret again
    assert bearer(raw).get(RUNS).status_code == 200
    again = client.get(url).content.decode()
    assert raw not in again and token.prefix in again

    entry = AuditEntry.objects.get(action="token.create", actor=user)
    assert entry.source == "ui" and entry.after["prefix"] == token.prefix
    assert raw not in json.dumps(entry.after) and raw.split("_", 2)[2] not in json.dumps(
        entry.after
    )

    revoked = client.post(reverse("runs:token-revoke", args=[token.pk]))
    assert revoked.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert AuditEntry.objects.filter(action="token.revoke", actor=user).count() == 1
    assert_error(bearer(raw).get(RUNS), 401, "authentication_failed")
    assert b"revoked" in client.get(url).content


def test_tokens_page_validation_and_ownership(client):
    owner = user_with_role("operator", "owen")
    other = user_with_role("operator", "otto")
    client.force_login(other)
    refused = client.post(reverse("runs:tokens"), {"name": ""})
    assert refused.status_code == 400 and b"name" in refused.content
    assert (
        client.post(reverse("runs:tokens"), {"name": "x", "expires_days": "0"}).status_code == 400
    )
    token_for(owner, "mine")
    token = ApiToken.objects.get(user=owner)
    assert client.post(reverse("runs:token-revoke", args=[token.pk])).status_code == 404
    assert b"mine" not in client.get(reverse("runs:tokens")).content
    token.refresh_from_db()
    assert token.revoked_at is None


def test_tokens_page_needs_login(client):
    response = client.get(reverse("runs:tokens"))
    assert response.status_code == 302 and "/login/" in response["Location"]


# --- the command ---------------------------------------------------------------------------------


def test_create_api_token_command_prints_a_working_token(operator_user):
    out = io.StringIO()
    call_command("create_api_token", "olga", "--name", "script", "--expires-days", "7", stdout=out)
    raw = out.getvalue().strip()
    token = ApiToken.objects.get(name="script")
    assert raw.startswith(token.prefix) and token.expires_at is not None
    assert bearer(raw).get(RUNS).status_code == 200
    entry = AuditEntry.objects.get(action="token.create")
    assert entry.source == "cli" and entry.actor_label == "cli"
    with pytest.raises(CommandError, match="no user"):
        call_command("create_api_token", "ghost", stdout=io.StringIO())
