from __future__ import annotations

import os
from typing import Any

import pytest
from django.conf import settings
from django.core.cache import caches
from django.core.exceptions import ImproperlyConfigured
from django.db import connection


def pytest_sessionstart(session: pytest.Session) -> None:
    if os.environ.get("AWAKEN_REQUIRE_POSTGRES") == "1" and _vendor() != "postgresql":
        pytest.exit("AWAKEN_REQUIRE_POSTGRES=1 but DATABASE_URL is not PostgreSQL", returncode=3)
    if os.environ.get("AWAKEN_REQUIRE_INTEGRATION") == "1" and (
        _vendor() != "postgresql" or not settings.REDIS_URL
    ):
        pytest.exit("AWAKEN_REQUIRE_INTEGRATION=1 needs PostgreSQL and REDIS_URL", returncode=3)


def _vendor() -> str | None:
    try:
        return connection.vendor
    except ImproperlyConfigured:  # running the pure runtime tests without Django
        return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`postgres` tests need PostgreSQL; locally on SQLite they are skipped."""
    if _vendor() == "postgresql":
        return
    skip = pytest.mark.skip(reason="needs PostgreSQL (set DATABASE_URL)")
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings: Any) -> None:
    """Users made in tests get cheap password hashes (tests/fast_password_hasher.py)."""
    settings.PASSWORD_HASHERS = [
        "tests.fast_password_hasher.OneIterationPBKDF2PasswordHasher",
        *settings.PASSWORD_HASHERS,
    ]


@pytest.fixture(autouse=True)
def _no_dashboard_cache(settings: Any) -> None:
    """Tests read the dashboard right after changing runs; one test turns the cache on."""
    settings.AWAKEN_DASHBOARD_CACHE_SECONDS = 0


def clear_process_caches() -> None:
    """Per-process caches of immutable rows are keyed by id; SQLite hands out the ids of
    rolled-back rows again, so what a test (or a module's shared data) builds starts with
    empty caches."""
    from agents.selectors import agent_version_by_id

    agent_version_by_id.cache_clear()
    caches["default"].clear()  # the dashboard's figures, the usage sums
    from runs.operations.services.budgets import cached as budgets

    budgets.reset()  # the budgets a test set (docs/budgets.md)


@pytest.fixture(autouse=True)
def _fresh_process_caches() -> None:
    clear_process_caches()


@pytest.fixture(autouse=True)
def _fresh_channel_layer() -> None:
    """Each test runs its sockets on a loop of its own: a layer kept from another test
    can hold a Redis receive lock bound to that test's (closed) loop."""
    from channels.layers import channel_layers

    channel_layers.backends.clear()


@pytest.fixture
def empty_broker() -> None:
    """Empty the in-memory broker's queues before a test starts the embedded worker: every
    run an earlier test of this process started left its task there (no worker ran it),
    and a worker would first go through thousands of them."""
    from celery import current_app

    with current_app.connection_for_write() as conn:
        for queue in current_app.amqp.queues:
            conn.default_channel.queue_purge(queue)


# --- users and logged-in clients ----------------------------------------------------------
# `<who>_user` is a User (not logged in anywhere); `<who>_client` is Django's test client
# logged in to the pages; `<who>_api` is a DRF APIClient sending an API token.


@pytest.fixture
def allow_local_providers(settings: Any) -> Any:
    """Model providers may reach this machine: the explicit opt-in a local model server
    needs (AWAKEN_PROVIDERS_ALLOW_PRIVATE), for the tests whose OpenAI-compatible server
    (tests/agents/openai_server.py) listens on 127.0.0.1."""
    settings.AWAKEN_PROVIDERS_ALLOW_PRIVATE = ["127.0.0.1", "::1"]
    return settings


@pytest.fixture
def operator_user(db: None) -> Any:
    """A user in the operator role, "olga"."""
    from tests.factories import user_with_role

    return user_with_role("operator", "olga")


@pytest.fixture
def viewer_user(db: None) -> Any:
    """A user in the viewer role, "vic"."""
    from tests.factories import user_with_role

    return user_with_role("viewer", "vic")


@pytest.fixture
def root_user(db: None) -> Any:
    """A superuser, "root"."""
    from tests.factories import superuser

    return superuser("root")


@pytest.fixture
def operator_client(client: Any) -> Any:
    """The test client logged in as a new operator, "alice"."""
    from tests.factories import user_with_role

    client.force_login(user_with_role("operator", "alice"))
    return client


@pytest.fixture
def viewer_client(client: Any) -> Any:
    """The test client logged in as a new viewer, "viewer"."""
    from tests.factories import user_with_role

    client.force_login(user_with_role("viewer"))
    return client


@pytest.fixture
def root_client(client: Any, root_user: Any) -> Any:
    """The test client logged in as `root_user`."""
    client.force_login(root_user)
    return client


@pytest.fixture
def operator_api(operator_user: Any) -> Any:
    """An APIClient with a token of `operator_user`."""
    from tests.factories import bearer, token_for

    return bearer(token_for(operator_user, "ops"))


@pytest.fixture
def viewer_api(viewer_user: Any) -> Any:
    """An APIClient with a token of `viewer_user`."""
    from tests.factories import bearer, token_for

    return bearer(token_for(viewer_user, "reader"))


@pytest.fixture
def anonymous_api() -> Any:
    """An APIClient with no credentials."""
    from rest_framework.test import APIClient

    return APIClient()
