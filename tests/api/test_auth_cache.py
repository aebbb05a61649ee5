"""The in-process token cache (common.api.tokens): a verified token skips the database for
AWAKEN_TOKEN_CACHE_SECONDS; revoking or deactivating in this process applies at once,
elsewhere (no signal: a queryset update) within the TTL; the raw token is never kept."""

from __future__ import annotations

import datetime as dt
import pickle
import time

import pytest
from django.core.cache import caches
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from common.api.tokens import token_cache, token_revoke, token_verify
from common.audit import Actor
from common.models import ApiToken
from tests.api.helpers import assert_error
from tests.factories import bearer, token_for

pytestmark = pytest.mark.django_db

RUNS = "/api/v1/runs"


@pytest.fixture(autouse=True)
def _cache_on(settings):
    settings.AWAKEN_TOKEN_CACHE_SECONDS = 5.0
    token_cache.clear()
    yield
    token_cache.clear()


class Clock:
    """The wall clock the cache framework reads for its expiry times."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = time.time()
        monkeypatch.setattr(time, "time", lambda: self.now)


def stored() -> list:
    """What the `api_tokens` cache holds, unpickled (LocMemCache keeps pickles)."""
    return [pickle.loads(value) for value in caches["api_tokens"]._cache.values()]


def test_a_verified_token_is_reused_without_a_query(operator_user):
    raw = token_for(operator_user)
    first = token_verify(raw)
    assert first is not None
    with CaptureQueriesContext(connection) as queries:
        again = token_verify(raw)
    assert again is not None and again.pk == first.pk and again.user.pk == operator_user.pk
    assert len(queries) == 0, [q["sql"] for q in queries]


def test_the_cache_keeps_no_raw_token_and_refuses_a_wrong_secret(operator_user):
    raw = token_for(operator_user)
    assert token_verify(raw) is not None
    assert len(stored()) == 1
    assert raw not in repr(stored())
    secret = raw.split("_", 2)[2]
    assert secret not in repr(stored()) and secret not in repr(vars(stored()[0][2]))
    forged = raw[:-4] + ("AAAA" if not raw.endswith("AAAA") else "BBBB")
    assert token_verify(forged) is None
    assert token_verify(raw) is not None  # the forgery did not evict or poison it


def test_each_request_gets_its_own_copy(operator_user):
    raw = token_for(operator_user)
    first = token_verify(raw)
    assert first is not None
    first.user.first_name = "changed by one request"
    first.name = "changed"
    second = token_verify(raw)
    assert second is not None
    assert (second.user.first_name, second.name) == ("", "test")


def test_revoking_in_this_process_applies_at_once(operator_user):
    raw = token_for(operator_user)
    client = bearer(raw)
    assert client.get(RUNS).status_code == 200
    token_revoke(token=ApiToken.objects.get(), actor=Actor(label="test"))
    assert_error(client.get(RUNS), 401, "authentication_failed")


def test_deactivating_the_user_in_this_process_applies_at_once(operator_user):
    client = bearer(token_for(operator_user))
    assert client.get(RUNS).status_code == 200
    operator_user.is_active = False
    operator_user.save()
    assert_error(client.get(RUNS), 401, "authentication_failed")


def test_deleting_the_token_applies_at_once(operator_user):
    raw = token_for(operator_user)
    assert token_verify(raw) is not None
    ApiToken.objects.get().delete()
    assert token_verify(raw) is None


def test_a_revoke_elsewhere_applies_within_the_ttl(operator_user, monkeypatch):
    clock = Clock(monkeypatch)
    raw = token_for(operator_user)
    assert token_verify(raw) is not None
    # another process revokes it: no signal reaches this one
    ApiToken.objects.update(revoked_at=timezone.now())
    clock.now += 4.9
    assert token_verify(raw) is not None
    clock.now += 0.2
    assert token_verify(raw) is None


def test_a_user_deactivated_elsewhere_is_refused_within_the_ttl(operator_user, monkeypatch):
    clock = Clock(monkeypatch)
    raw = token_for(operator_user)
    assert token_verify(raw) is not None
    type(operator_user).objects.filter(pk=operator_user.pk).update(is_active=False)
    clock.now += 5.0
    assert token_verify(raw) is None


def test_expiry_is_checked_on_every_request(operator_user, monkeypatch):
    expires = timezone.now() + dt.timedelta(minutes=10)
    raw = token_for(operator_user, expires_at=expires)
    assert token_verify(raw) is not None
    monkeypatch.setattr("django.utils.timezone.now", lambda: expires + dt.timedelta(microseconds=1))
    with CaptureQueriesContext(connection):
        assert token_verify(raw) is None


def test_a_zero_ttl_disables_the_cache(operator_user, settings):
    settings.AWAKEN_TOKEN_CACHE_SECONDS = 0
    raw = token_for(operator_user)
    assert token_verify(raw) is not None
    with CaptureQueriesContext(connection) as queries:
        assert token_verify(raw) is not None
    assert len(queries) == 1
    assert stored() == []


def test_last_use_is_still_recorded_once_a_minute(operator_user, monkeypatch):
    raw = token_for(operator_user)
    start = timezone.now()
    monkeypatch.setattr("common.api.tokens.timezone.now", lambda: start)
    assert token_verify(raw) is not None
    assert ApiToken.objects.get().last_used_at == start
    later = start + dt.timedelta(seconds=61)
    monkeypatch.setattr("common.api.tokens.timezone.now", lambda: later)
    with CaptureQueriesContext(connection) as queries:
        assert token_verify(raw) is not None  # from the cache, but the minute is up
    assert len(queries) == 1
    assert ApiToken.objects.get().last_used_at == later


def test_a_sign_in_keeps_the_cached_tokens_and_another_user_change_drops_them(operator_user):
    from django.contrib.auth.models import update_last_login

    token_verify(token_for(operator_user))
    assert len(stored()) == 1
    update_last_login(None, operator_user)  # what every sign-in does
    assert len(stored()) == 1
    operator_user.first_name = "Renamed"
    operator_user.save()
    assert stored() == []
