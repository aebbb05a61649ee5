"""Runs call providers with the decrypted stored key and the extra headers, and the outcome
of their model calls becomes the provider's health (real local server, no mocks)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from agents.models import Health, ModelProvider
from agents.providers import ProviderConfigError, client_for, model_snapshot
from agents.providers.openai_client import OpenAIChatClient
from runs.models import Run, RunEvent

from .openai_server import FakeOpenAIServer, error_reply, text_reply
from .providers_support import agent_on, openai_provider, priced_model, run_to_end, unique_secret

# the providers are the local OpenAI-compatible server, on 127.0.0.1: opted in explicitly
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("allow_local_providers")]


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        yield srv


def test_the_snapshot_holds_no_key_and_the_client_gets_the_decrypted_one(server, monkeypatch):
    key = unique_secret()
    monkeypatch.setenv("AWAKEN_TEST_SHADOWED_KEY", "env-key-loses")
    provider = openai_provider(
        server, key=key, headers={"X-Team": "ops"}, api_key_env="AWAKEN_TEST_SHADOWED_KEY"
    )
    model = priced_model(provider)

    snapshot = model_snapshot(ModelProvider.objects.get(pk=provider.pk).models.get())
    client = client_for(snapshot)

    assert key not in json.dumps(snapshot)
    assert snapshot["api_key_ciphertext"] == provider.api_key_encrypted
    assert isinstance(client, OpenAIChatClient)
    assert client._client.api_key == key  # the stored key wins over the variable
    assert client.extra_headers == {"X-Team": "ops"}
    assert key not in repr(client) and model.slug in client.model_id


def test_a_run_sends_the_stored_key_and_headers_and_marks_the_provider_healthy(server):
    key = unique_secret()
    provider = openai_provider(server, key=key, headers={"X-Team": "ops"})
    agent = agent_on(priced_model(provider))
    server.script(text_reply("hi ", "there", usage=(12, 5)))

    run = run_to_end(agent)

    assert (run.status, run.status_reason, run.final_output) == ("done", "natural", "hi there")
    assert server.headers[0]["authorization"] == f"Bearer {key}"
    assert server.headers[0]["x-team"] == "ops"
    provider.refresh_from_db()
    assert provider.health == Health.HEALTHY and provider.health_checked_at is not None


def test_a_provider_error_fails_the_run_and_marks_the_provider_failing(server):
    provider = openai_provider(server, key=unique_secret())
    agent = agent_on(priced_model(provider))
    server.script(error_reply(401, "Incorrect API key provided", "invalid_api_key"))

    run = run_to_end(agent)

    assert (run.status, run.status_reason) == ("done", "error")
    assert run.error_payload == {"message": "provider error 401: Incorrect API key provided"}
    provider.refresh_from_db()
    assert provider.health == Health.FAILING
    assert provider.health_error == "provider error 401: Incorrect API key provided"
    failed_at = provider.health_checked_at

    server.script(text_reply("back"))
    again = run_to_end(agent, "again")

    assert again.final_output == "back"
    provider.refresh_from_db()
    assert provider.health == Health.HEALTHY and provider.health_error == ""
    assert provider.health_checked_at > failed_at


def test_exhausted_rate_limit_retries_mark_the_provider_failing(server):
    provider = openai_provider(server)
    agent = agent_on(priced_model(provider))
    server.always(error_reply(429, "Rate limit reached", "rate_limit_exceeded"))

    run = run_to_end(agent)

    assert run.status_reason == "error"
    provider.refresh_from_db()
    assert provider.health == Health.FAILING
    assert provider.health_error.startswith("rate limited by provider after 3 retries")


def test_a_healthy_provider_is_not_rewritten_by_every_successful_call(server):
    provider = openai_provider(server)
    agent = agent_on(priced_model(provider))
    ModelProvider.objects.filter(pk=provider.pk).update(health=Health.HEALTHY)
    server.always(text_reply("ok"))

    run_to_end(agent)

    provider.refresh_from_db()
    assert provider.health == Health.HEALTHY
    assert provider.health_checked_at is None  # no write: it was already healthy


def test_a_key_echoed_by_the_provider_never_reaches_the_run_or_its_events(server):
    key = unique_secret()
    provider = openai_provider(server, key=key)
    agent = agent_on(priced_model(provider))
    server.script(error_reply(401, f"Incorrect API key provided: {key}"))

    run = run_to_end(agent)

    assert run.error_payload == {
        "message": "provider error 401: Incorrect API key provided: [redacted]"
    }
    for payload in RunEvent.objects.filter(run=run).values_list("payload", flat=True):
        assert key not in json.dumps(payload)
    row = Run.objects.filter(pk=run.pk).values().get()
    assert key not in json.dumps(row, default=str)
    provider.refresh_from_db()
    assert key not in provider.health_error and "[redacted]" in provider.health_error


def test_a_missing_key_variable_fails_the_run_and_marks_the_provider_failing(server, monkeypatch):
    monkeypatch.delenv("AWAKEN_TEST_ABSENT_KEY", raising=False)
    provider = openai_provider(server, api_key_env="AWAKEN_TEST_ABSENT_KEY")
    agent = agent_on(priced_model(provider))

    run = run_to_end(agent)

    assert run.status_reason == "error"
    assert "AWAKEN_TEST_ABSENT_KEY" in run.error_payload["message"]
    assert server.request_count == 0
    provider.refresh_from_db()
    assert provider.health == Health.FAILING and "AWAKEN_TEST_ABSENT_KEY" in provider.health_error
    with pytest.raises(ProviderConfigError, match="is not set"):
        client_for(model_snapshot(provider.models.get()))


def test_a_scripted_provider_is_left_alone(server):
    from tests.factories import scripted_agent

    from .providers_support import published

    agent = published(scripted_agent([{"error": "scripted failure"}]))

    run = run_to_end(agent)

    assert run.status_reason == "error"
    provider = agent.model.provider
    provider.refresh_from_db()
    assert provider.health == Health.UNKNOWN
