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
def _no_dashboard_cache(settings: Any) -> None:
    """Tests read the dashboard right after changing runs; one test turns the cache on."""
    settings.AWAKEN_DASHBOARD_CACHE_SECONDS = 0


@pytest.fixture(autouse=True)
def _fresh_process_caches() -> None:
    """Per-process caches of immutable rows are keyed by id; SQLite hands out the ids of
    rolled-back rows again, so each test starts with empty caches."""
    from agents.services import agent_version_by_id

    agent_version_by_id.cache_clear()
    caches["default"].clear()  # the dashboard's figures
