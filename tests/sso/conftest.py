"""Fixtures for the single sign-on tests: a real OpenID Connect provider
(oidc-provider-mock, a Flask app) on a thread of the test process."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from oidc_provider_mock import run_server_in_thread

from awaken_site.sso import forget_discovery


@pytest.fixture(autouse=True)
def _fresh_discovery() -> Iterator[None]:
    forget_discovery()
    yield
    forget_discovery()


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch, settings: Any) -> Iterator[str]:
    """The provider's issuer URL; the site's settings point at it."""
    monkeypatch.setenv("AUTHLIB_INSECURE_TRANSPORT", "1")  # plain http on localhost
    with run_server_in_thread() as server:
        issuer = f"http://localhost:{server.server_port}"
        settings.OIDC_ISSUER = issuer
        settings.OIDC_CLIENT_ID = "awaken-test"
        settings.OIDC_CLIENT_SECRET = "s3cret"
        settings.OIDC_PROVIDER_NAME = "Example ID"
        yield issuer
