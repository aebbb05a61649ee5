"""A provider's API key never leaks: not in any page, API response, log record, audit row
or other database row — through the admin, test connection, runs that call the provider
(successful, and failing with a provider that echoes the key back), the run pages, the
dashboard and every API endpoint."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.apps import apps
from django.contrib.sessions.models import Session
from django.urls import URLPattern, reverse

from agents.models import Model, ModelProvider, RemoteEndpoint
from awaken_site import api_urls
from common.models import AuditEntry
from runs.models import Run, Ticket
from tests.factories import bearer, superuser, token_for, user_with_role

from .openai_server import FakeOpenAIServer, error_reply, text_reply
from .providers_support import (
    agent_on,
    openai_provider,
    priced_model,
    provider_form,
    run_to_end,
    unique_secret,
)

pytestmark = pytest.mark.django_db

LOGGERS = ["", "django", "openai", "httpx", "httpx2", "httpcore", "httpcore2", "agents", "runs"]


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        yield srv


@pytest.fixture
def debug_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    for name in LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)
    return caplog


class Leaks:
    """Everything a user or an operator could read, collected as it is produced."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.seen: list[tuple[str, str]] = []

    def body(self, what: str, response: Any) -> str:
        if getattr(response, "streaming", False):
            text = b"".join(response.streaming_content).decode(errors="replace")
        else:
            text = response.content.decode(errors="replace")
        assert response.status_code < 500, (what, response.status_code, text[:2000])
        self.seen.append((what, text))
        return text

    def assert_clean(self) -> None:
        leaked = [what for what, text in self.seen if self.key in text]
        assert leaked == [], f"the key appears in: {leaked}"


def api_routes() -> list[tuple[str, list[str]]]:
    """Every named API route and its path parameters (new routes are covered too)."""
    routes = []
    for pattern in api_urls.urlpatterns:
        if isinstance(pattern, URLPattern) and pattern.name and pattern.name != "api-docs":
            routes.append((pattern.name, re.findall(r"<(?:\w+:)?(\w+)>", str(pattern.pattern))))
    return routes


def every_row_of_every_table() -> str:
    chunks = []
    for model in apps.get_models():
        for row in model.objects.values():
            chunks.append(json.dumps(row, default=str))
    for session in Session.objects.all():
        chunks.append(json.dumps(session.get_decoded(), default=str))
    return "\n".join(chunks)


def log_text(caplog: pytest.LogCaptureFixture) -> str:
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    return "\n".join(formatter.format(record) for record in caplog.records)


def test_the_api_key_never_leaks(client, server, debug_logs, allow_local_providers):
    key = unique_secret()
    leaks = Leaks(key)

    # an admin stores the key through the form, looks at every provider page, tests it
    root = superuser()
    client.force_login(root)
    provider = openai_provider(server, headers={"X-Team": "ops"})
    model = priced_model(provider, input_price="2.5", output_price="10")
    change = reverse("admin:agents_modelprovider_change", args=[provider.pk])
    leaks.body("admin save", client.post(change, provider_form(provider, api_key=key), follow=True))
    provider.refresh_from_db()
    assert provider.stored_api_key() == key, "the key was stored"
    agent = agent_on(model, slug="priced")
    endpoint = RemoteEndpoint.objects.create(
        slug="partner", name="Partner", base_url="https://partner.example/a2a"
    )
    endpoint.set_token(unique_secret())
    endpoint.save()
    leaks.body(
        "admin form error", client.post(change, provider_form(provider, api_key=key, headers="[]"))
    )

    server.models = ["gpt-test", "gpt-other"]
    test_url = reverse("admin:agents_modelprovider_test_connection", args=[provider.pk])
    leaks.body("test connection ok", client.post(test_url, follow=True))
    server.models_error = error_reply(401, f"Incorrect API key provided: {key}")
    leaks.body("test connection echoing the key", client.post(test_url, follow=True))
    leaks.body(
        "test connection action",
        client.post(
            reverse("admin:agents_modelprovider_changelist"),
            {"action": "test_connection", "_selected_action": [provider.pk]},
            follow=True,
        ),
    )
    server.models_error = None

    # runs that call the provider: one succeeds, one fails with the key echoed back
    server.script(text_reply("all good", usage=(30, 12)))
    ok = run_to_end(agent, "hello")
    server.script(error_reply(401, f"Incorrect API key provided: {key}", "invalid_api_key"))
    failed = run_to_end(agent, "again")
    assert (ok.status_reason, failed.status_reason) == ("natural", "error")
    assert server.headers[-1]["authorization"] == f"Bearer {key}", "the key was used"

    admin_pages = [
        reverse("admin:index"),
        reverse("admin:agents_modelprovider_changelist"),
        reverse("admin:agents_modelprovider_add"),
        change,
        reverse("admin:agents_modelprovider_history", args=[provider.pk]),
        reverse("admin:agents_modelprovider_delete", args=[provider.pk]),
        reverse("admin:agents_model_changelist"),
        reverse("admin:agents_model_change", args=[model.pk]),
        reverse("admin:agents_agent_changelist"),
        reverse("admin:agents_agent_change", args=[agent.pk]),
        reverse("admin:agents_remoteendpoint_changelist"),
        reverse("admin:agents_remoteendpoint_change", args=[endpoint.pk]),
        reverse("admin:admin_logentry_changelist")
        if _has_url("admin:admin_logentry_changelist")
        else None,
    ]
    for url in filter(None, admin_pages):
        leaks.body(url, client.get(url))

    operator_pages = [
        reverse("runs:dashboard"),
        reverse("runs:dashboard-stats"),
        reverse("runs:run-list"),
        reverse("runs:run-list") + f"?provider={provider.slug}",
        reverse("runs:inbox"),
        reverse("runs:audit"),
        reverse("runs:thread-list"),
    ]
    for run in (ok, failed):
        operator_pages += [
            reverse("runs:run-detail", args=[run.pk]),
            reverse("runs:run-header", args=[run.pk]),
            reverse("runs:run-transcript", args=[run.pk]),
            reverse("runs:run-timeline", args=[run.pk]),
            reverse("runs:run-row", args=[run.pk]),
            reverse("runs:thread-detail", args=[run.thread_id]),
        ]
    for url in operator_pages:
        leaks.body(url, client.get(url))

    api = bearer(token_for(user_with_role("admin", "cfg")))
    values = {
        "run_id": str(failed.pk),
        "thread_id": str(failed.thread_id),
        "agent_id": agent.slug,
        "endpoint_id": endpoint.slug,
        "provider_id": provider.slug,
        "model_id": model.slug,
        "ticket_id": str(Ticket.objects.values_list("pk", flat=True).first() or failed.pk),
    }
    covered = []
    for name, params in api_routes():
        if any(param not in values for param in params):
            continue
        url = reverse(name, kwargs={param: values[param] for param in params})
        for run in (ok, failed) if "run_id" in params else (None,):
            if run is not None:
                url = reverse(
                    name, kwargs={**{p: values[p] for p in params}, "run_id": str(run.pk)}
                )
            leaks.body(f"GET {url}", api.get(url))
            covered.append(name)
    assert {"api-runs", "api-run", "api-run-events", "api-agents", "api-agent", "api-audit"} <= set(
        covered
    )
    leaks.body("schema", api.get("/api/v1/schema/"))

    leaks.assert_clean()
    logs = log_text(debug_logs)
    captured = {record.name.split(".")[0] for record in debug_logs.records}
    # the SDK's and its HTTP transport's debug logs were captured (and hold no key)
    assert "openai" in captured and any(name.startswith("httpcore") for name in captured)
    assert key not in logs
    for entry in AuditEntry.objects.all():
        assert key not in json.dumps(
            [entry.action, entry.before, entry.after, entry.comment], default=str
        )
    assert AuditEntry.objects.filter(action="modelprovider.update").exists()
    assert key not in every_row_of_every_table()
    assert key not in json.dumps(Run.objects.get(pk=failed.pk).error_payload)
    provider = ModelProvider.objects.get(pk=provider.pk)
    assert provider.stored_api_key() == key and Model.objects.filter(provider=provider).exists()


def _has_url(name: str) -> bool:
    from django.urls import NoReverseMatch

    try:
        reverse(name)
    except NoReverseMatch:
        return False
    return True
