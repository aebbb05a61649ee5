"""An endpoint whose host does not resolve (yet) is saved with a warning, so that its
health check can say it is unreachable; an address that resolves to a private range is
still refused at save time, and every connection is still vetted."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from agents.models import RemoteEndpoint
from agents.services.endpoints import endpoint_config_errors, endpoint_probe
from runs.runtime.netguard import AddressRefusedError, vetted_addresses

pytestmark = pytest.mark.django_db

NOWHERE = "https://agents.no-such-host.invalid/a2a"  # .invalid never resolves (RFC 2606)


def form(**overrides: Any) -> dict[str, Any]:
    data = {
        "slug": "later",
        "name": "Not there yet",
        "backend": "a2a",
        "base_url": NOWHERE,
        "target": "",
        "timeout_ms": 5000,
        "poll_interval_ms": 50,
        "history_length": "",
        "token": "",
    }
    data.update(overrides)
    return data


def test_an_unresolvable_host_is_saved_with_a_warning(root_client, settings):
    settings.AWAKEN_ENDPOINTS_ALLOW_PRIVATE = False
    response = root_client.post(reverse("admin:agents_remoteendpoint_add"), form(), follow=True)
    assert response.status_code == 200
    endpoint = RemoteEndpoint.objects.get(slug="later")
    assert endpoint.base_url == NOWHERE
    shown = [str(m) for m in response.context["messages"]]
    warning = next(text for text in shown if "could not resolve host" in text)
    assert "agents.no-such-host.invalid" in warning and "until the name resolves" in warning


def test_its_health_check_reports_it_unreachable(settings):
    settings.AWAKEN_ENDPOINTS_ALLOW_PRIVATE = False
    endpoint = RemoteEndpoint.objects.create(slug="later", name="Later", base_url=NOWHERE)
    result = endpoint_probe(endpoint)
    assert not result.ok
    assert "Unreachable: could not resolve host 'agents.no-such-host.invalid'" in result.error
    endpoint.refresh_from_db()
    assert endpoint.health == "failing" and "Unreachable" in endpoint.health_error


def test_a_private_address_is_still_refused_at_save_time(root_client, settings):
    settings.AWAKEN_ENDPOINTS_ALLOW_PRIVATE = False
    response = root_client.post(
        reverse("admin:agents_remoteendpoint_add"), form(base_url="http://10.1.2.3/a2a")
    )
    assert response.status_code == 200
    assert "non-public" in response.content.decode()
    assert not RemoteEndpoint.objects.exists()
    warnings: list[str] = []
    errors = endpoint_config_errors(
        RemoteEndpoint(slug="x", name="x", base_url="http://127.0.0.1:9/"), warnings=warnings
    )
    assert "loopback" in errors["base_url"] and warnings == []


def test_connecting_to_it_is_still_refused():
    with pytest.raises(AddressRefusedError, match="could not resolve host"):
        vetted_addresses("agents.no-such-host.invalid", 443, allow_private=False)
