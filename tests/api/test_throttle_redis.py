"""The API throttle on Redis: one per-process connection pool, one round trip per
request, DRF's sliding-window rule with 429 and Retry-After, and fail-open."""

from __future__ import annotations

import os
import threading
import uuid
from types import SimpleNamespace
from typing import Any

import pytest
import redis

from common.api import auth
from common.models import ApiToken
from tests.api.helpers import assert_error
from tests.factories import bearer, token_for
from tests.processes import wait_for

pytestmark = [pytest.mark.django_db, pytest.mark.redis]

RUNS = "/api/v1/runs"


@pytest.fixture
def redis_url(settings) -> str:
    url = os.environ.get("REDIS_URL", "")
    if not url:
        pytest.skip("needs REDIS_URL")
    settings.REDIS_URL = url
    return url


@pytest.fixture(autouse=True)
def _fresh_state():
    auth._throttle_redis = auth._ThrottleRedis()
    yield
    auth._throttle_redis = auth._ThrottleRedis()


def rate(settings, value: str) -> None:
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"api_token": value},
    }


def in_new_thread(call: Any) -> Any:
    """As daphne serves each request: on a thread of its own."""
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(call()))
    thread.start()
    thread.join()
    return out[0]


def test_throttled_on_redis_is_429_with_retry_after(
    operator_api, operator_user, settings, redis_url
):
    rate(settings, "3/min")
    for _ in range(3):
        assert operator_api.get(RUNS).status_code == 200
    response = operator_api.get(RUNS)
    error = assert_error(response, 429, "throttled")
    assert 0 < error["details"]["retry_after"] <= 60
    assert 0 < int(response["Retry-After"]) <= 60
    assert bearer(token_for(operator_user, "second")).get(RUNS).status_code == 200


def test_the_window_slides(operator_api, settings, redis_url):
    rate(settings, "2/s")
    window = auth.TokenRateThrottle().duration  # seconds, from the rate
    assert [operator_api.get(RUNS).status_code for _ in range(3)] == [200, 200, 429]
    wait_for(  # a refused request does not count: asking again does not hold the window
        lambda: operator_api.get(RUNS).status_code == 200,
        timeout=2 * window,
        what="a request allowed once the window slid",
    )


def test_one_round_trip_and_no_new_connection_per_request(settings, redis_url):
    rate(settings, "1000/min")
    request = SimpleNamespace(auth=ApiToken(prefix=f"awk_{uuid.uuid4().hex[:12]}"), user=None)

    def throttle() -> bool:
        return auth.TokenRateThrottle().allow_request(request, None)

    assert throttle()  # the pool and the script exist from here on
    server = redis.Redis.from_url(redis_url)

    def stats() -> tuple[int, int, int]:
        info = server.info("all")
        return (
            info["total_connections_received"],
            info["total_commands_processed"],
            info.get("cmdstat_evalsha", {}).get("calls", 0),
        )

    connections_before, commands_before, scripts_before = stats()
    n = 20
    for _ in range(n):
        assert in_new_thread(throttle)
    connections_after, commands_after, scripts_after = stats()
    assert connections_after - connections_before == 0
    assert scripts_after - scripts_before == n  # one EVALSHA a request...
    # ...and nothing else: an allowed request runs 5 commands inside the script
    outside = commands_after - commands_before - 6 * n
    assert outside <= 1, outside  # the INFO above


def test_a_redis_outage_lets_requests_through_and_backs_off(operator_api, settings, redis_url):
    rate(settings, "1/min")
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    calls = 0
    real = auth._ThrottleRedis.script

    def counting(self: auth._ThrottleRedis) -> Any:
        nonlocal calls
        script = real(self)
        if script is not None:
            calls += 1
        return script

    auth._ThrottleRedis.script = counting  # type: ignore[method-assign]
    try:
        assert [operator_api.get(RUNS).status_code for _ in range(3)] == [200, 200, 200]
    finally:
        auth._ThrottleRedis.script = real  # type: ignore[method-assign]
    assert calls == 1  # the failure is remembered: the next requests skip Redis
