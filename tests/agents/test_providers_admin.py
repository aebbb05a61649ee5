"""The model provider admin: a write-only, encrypted API key, validated headers and base
URL, and "Test connection" against a real local OpenAI-compatible server (no mocks)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from cryptography.fernet import Fernet
from django.contrib.auth.models import Permission, User
from django.test import override_settings
from django.urls import reverse

from agents import secrets
from agents.models import Health, ModelProvider
from agents.providers import resolve_api_key
from common.models import AuditEntry
from tests.factories import ProviderFactory

from .openai_server import FakeOpenAIServer, error_reply
from .providers_support import (
    openai_provider,
    priced_model,
    provider_form,
    unique_secret,
)

# the providers are the local OpenAI-compatible server, on 127.0.0.1: opted in explicitly
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("allow_local_providers")]


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        yield srv


def change_url(provider: ModelProvider) -> str:
    return reverse("admin:agents_modelprovider_change", args=[provider.pk])


def connection_url(provider: ModelProvider) -> str:
    return reverse("admin:agents_modelprovider_test_connection", args=[provider.pk])


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]] if response.context else []


def password_inputs(page: str) -> list[str]:
    return re.findall(r"<input[^>]*name=\"api_key\"[^>]*>", page)


# --- the key is write-only -------------------------------------------------------------------


def test_the_change_page_never_renders_the_stored_key(root_client):
    key = unique_secret()
    provider = openai_provider(None, base_url="http://127.0.0.1:9/v1", key=key)

    page = root_client.get(change_url(provider)).content.decode()

    assert key not in page
    assert provider.api_key_encrypted not in page  # not even the ciphertext
    [field] = password_inputs(page)
    assert 'type="password"' in field and "value=" not in field
    assert "A key is stored (encrypted)" in page
    assert "Stored (encrypted at rest; never shown)." in page
    listing = root_client.get(reverse("admin:agents_modelprovider_changelist")).content
    assert key.encode() not in listing


def test_a_typed_key_is_stored_encrypted_and_audited_without_the_key(root_client):
    provider = openai_provider(None, base_url="http://127.0.0.1:9/v1")
    key = unique_secret()

    response = root_client.post(change_url(provider), provider_form(provider, api_key=key))

    assert response.status_code == 302
    provider.refresh_from_db()
    assert provider.api_key_encrypted and key not in provider.api_key_encrypted
    assert secrets.decrypt(provider.api_key_encrypted) == key
    assert provider.stored_api_key() == key
    for entry in AuditEntry.objects.all():
        blob = f"{entry.before} {entry.after} {entry.comment}"
        assert key not in blob and provider.api_key_encrypted not in blob
    update = AuditEntry.objects.get(action="modelprovider.update")
    assert (update.before["api_key_stored"], update.after["api_key_stored"]) == (False, True)


def test_a_blank_key_field_keeps_the_stored_key(root_client):
    key = unique_secret()
    provider = openai_provider(None, base_url="http://127.0.0.1:9/v1", key=key)

    response = root_client.post(
        change_url(provider), provider_form(provider, name="Renamed", api_key="")
    )

    assert response.status_code == 302
    provider.refresh_from_db()
    assert provider.name == "Renamed"
    assert provider.stored_api_key() == key
    update = AuditEntry.objects.get(action="modelprovider.update")
    assert update.before["api_key_stored"] and update.after["api_key_stored"]


def test_clearing_removes_the_stored_key_and_falls_back_to_the_env_var(root_client, monkeypatch):
    monkeypatch.setenv("AWAKEN_TEST_PROVIDER_KEY", "from-env")
    provider = openai_provider(
        None,
        base_url="http://127.0.0.1:9/v1",
        key=unique_secret(),
        api_key_env="AWAKEN_TEST_PROVIDER_KEY",
    )

    response = root_client.post(change_url(provider), provider_form(provider, clear_api_key="on"))

    assert response.status_code == 302
    provider.refresh_from_db()
    assert provider.api_key_encrypted == "" and not provider.has_stored_api_key
    runs_use = resolve_api_key(
        ciphertext=provider.api_key_encrypted, key_env=provider.api_key_env, who="provider"
    )
    assert runs_use == "from-env"
    update = AuditEntry.objects.get(action="modelprovider.update")
    assert (update.before["api_key_stored"], update.after["api_key_stored"]) == (True, False)
    page = root_client.get(change_url(provider)).content.decode()
    assert "uses the environment variable AWAKEN_TEST_PROVIDER_KEY (set)" in page


def test_a_new_key_and_clear_together_are_refused(root_client):
    old = unique_secret()
    provider = openai_provider(None, base_url="http://127.0.0.1:9/v1", key=old)
    new = unique_secret()

    response = root_client.post(
        change_url(provider), provider_form(provider, api_key=new, clear_api_key="on")
    )

    page = response.content.decode()
    assert response.status_code == 200
    assert "Either type a new key or clear the stored one, not both." in page
    assert new not in page and old not in page
    provider.refresh_from_db()
    assert provider.stored_api_key() == old


def test_a_form_error_never_echoes_the_typed_key(root_client):
    provider = openai_provider(None, base_url="http://127.0.0.1:9/v1")
    key = unique_secret()

    response = root_client.post(
        change_url(provider),
        provider_form(provider, api_key=key, headers='{"Authorization": "Bearer x"}'),
    )

    page = response.content.decode()
    assert response.status_code == 200
    assert key not in page
    [field] = password_inputs(page)
    assert "value=" not in field
    provider.refresh_from_db()
    assert not provider.has_stored_api_key


def test_adding_a_provider_with_a_key_stores_it_encrypted(root_client):
    key = unique_secret()

    response = root_client.post(
        reverse("admin:agents_modelprovider_add"), provider_form(slug="fresh", api_key=key)
    )

    assert response.status_code == 302, response.content.decode()[:3000]
    provider = ModelProvider.objects.get(slug="fresh")
    assert provider.stored_api_key() == key and key not in provider.api_key_encrypted
    assert AuditEntry.objects.get(action="modelprovider.create").after["api_key_stored"]


def test_keys_rotate_by_prepending_a_new_encryption_key():
    old_key, new_key = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    secret = unique_secret()
    with override_settings(AWAKEN_ENCRYPTION_KEYS=[old_key]):
        provider = openai_provider(None, base_url="http://127.0.0.1:9/v1", key=secret)
        stored = provider.api_key_encrypted
    with override_settings(AWAKEN_ENCRYPTION_KEYS=[new_key, old_key]):
        provider.refresh_from_db()
        assert provider.stored_api_key() == secret  # old rows still decrypt
        provider.set_api_key(secret)  # re-saving encrypts with the newest key
        provider.save()
        assert provider.api_key_encrypted != stored
    with override_settings(AWAKEN_ENCRYPTION_KEYS=[new_key]):
        provider.refresh_from_db()
        assert provider.stored_api_key() == secret
    unknown_key = Fernet.generate_key().decode()
    with (
        override_settings(AWAKEN_ENCRYPTION_KEYS=[unknown_key]),
        pytest.raises(secrets.SecretError, match="enter the secret again"),
    ):
        provider.stored_api_key()


# --- validation --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ('{"Authorization": "Bearer sk"}', "credentials go in the API key field"),
        ('{"proxy-authorization": "x"}', "credentials go in the API key field"),
        ('{"Connection": "close"}', "the HTTP client sets it for each connection"),
        ('{"Transfer-Encoding": "chunked"}', "the HTTP client sets it for each connection"),
        ('{"X-Team": 5}', "The value of header &#x27;X-Team&#x27; must be a string"),
        ('{"Bad Name": "x"}', "is not valid: use letters, digits and -"),
        ('["X-Team"]', "Headers must be a JSON object of names to values"),
        ('{"X-Team": "a\\r\\nInjected: 1"}', "must be one line"),
    ],
)
def test_invalid_headers_are_refused_with_what_to_fix(root_client, headers, message):
    provider = openai_provider(None, base_url="http://127.0.0.1:9/v1")

    response = root_client.post(change_url(provider), provider_form(provider, headers=headers))

    assert response.status_code == 200
    assert message in response.content.decode()
    provider.refresh_from_db()
    assert provider.headers == {}
    assert not AuditEntry.objects.exists()


def test_valid_headers_are_saved(root_client):
    provider = openai_provider(None, base_url="http://127.0.0.1:9/v1")

    response = root_client.post(
        change_url(provider), provider_form(provider, headers='{"OpenAI-Organization": "org-1"}')
    )

    assert response.status_code == 302
    provider.refresh_from_db()
    assert provider.headers == {"OpenAI-Organization": "org-1"}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"base_url": ""}, "An OpenAI-compatible provider needs its API base URL"),
        ({"base_url": "http://127.0.0.1:9/v1/chat/completions"}, "not an endpoint such as"),
        ({"base_url": "ftp://example.com/v1"}, "Use an http:// or https:// URL."),
        ({"api_key_env": "MY KEY"}, "is not an environment variable name"),
        ({"timeout_seconds": "0"}, "greater than or equal to 0.1"),
    ],
)
def test_bad_connection_settings_are_refused_with_what_to_fix(root_client, overrides, message):
    provider = openai_provider(None, base_url="http://127.0.0.1:9/v1")

    response = root_client.post(change_url(provider), provider_form(provider, **overrides))

    assert response.status_code == 200
    assert message in response.content.decode()


def test_a_scripted_provider_needs_no_base_url(root_client):
    response = root_client.post(
        reverse("admin:agents_modelprovider_add"),
        provider_form(slug="offline", kind="scripted", base_url=""),
    )

    assert response.status_code == 302
    assert ModelProvider.objects.get(slug="offline").kind == "scripted"


def test_the_model_admin_shows_context_window_and_prices(root_client):
    provider = openai_provider(None, base_url="http://127.0.0.1:9/v1")
    priced_model(provider, input_price="2.5", output_price="10", context_window=128000)

    page = root_client.get(reverse("admin:agents_model_changelist")).content.decode()

    assert "128000" in page and "2.5000" in page and "10.0000" in page
    assert "Input price per million usd" in page


# --- test connection ---------------------------------------------------------------------------


def test_test_connection_lists_the_models_and_marks_the_provider_healthy(root_client, server):
    key = unique_secret()
    server.models = ["gpt-b", "gpt-a"]
    provider = openai_provider(server, key=key, headers={"X-Team": "ops"})

    page = root_client.get(change_url(provider)).content.decode()
    assert connection_url(provider) in page  # the button on the change page
    response = root_client.post(connection_url(provider), follow=True)

    assert response.redirect_chain[-1][0] == change_url(provider)
    assert messages_of(response) == ["local: connected; 2 models: gpt-a, gpt-b"]
    assert server.paths == ["/v1/models"]
    assert server.headers[0]["authorization"] == f"Bearer {key}"
    assert server.headers[0]["x-team"] == "ops"
    provider.refresh_from_db()
    assert provider.health == Health.HEALTHY and provider.health_error == ""
    assert provider.health_checked_at is not None
    entry = AuditEntry.objects.get(action="modelprovider.test_connection")
    assert entry.after == {"health": "healthy", "error": "", "models": 2}


@pytest.mark.parametrize(
    ("status", "message", "expected"),
    [
        (401, "Incorrect API key provided", "provider error 401: Incorrect API key provided"),
        (500, "upstream exploded", "provider error 500: upstream exploded"),
    ],
)
def test_test_connection_records_the_providers_error(
    root_client, server, status, message, expected
):
    server.models_error = error_reply(status, message, "invalid_api_key")
    provider = openai_provider(server, key=unique_secret())

    response = root_client.post(connection_url(provider), follow=True)

    assert messages_of(response) == [f"local: connection failed: {expected}"]
    provider.refresh_from_db()
    assert provider.health == Health.FAILING
    assert provider.health_error == expected
    page = response.content.decode()
    assert expected in page


def test_a_provider_echoing_the_key_in_its_error_gets_it_redacted(root_client, server):
    key = unique_secret()
    server.models_error = error_reply(401, f"Incorrect API key provided: {key}")
    provider = openai_provider(server, key=key)

    response = root_client.post(connection_url(provider), follow=True)

    assert key not in response.content.decode()
    provider.refresh_from_db()
    assert provider.health_error == "provider error 401: Incorrect API key provided: [redacted]"


def test_the_test_connection_action_checks_each_selected_provider(root_client, server):
    scripted = ProviderFactory(slug="offline")
    priced_model(scripted, slug="demo")
    reachable = openai_provider(server, slug="reachable")
    unreachable = openai_provider(None, slug="gone", base_url="http://127.0.0.1:9/v1")

    response = root_client.post(
        reverse("admin:agents_modelprovider_changelist"),
        {
            "action": "test_connection",
            "_selected_action": [scripted.pk, reachable.pk, unreachable.pk],
        },
        follow=True,
    )

    shown = messages_of(response)
    assert shown[0].startswith("gone: connection failed: cannot reach provider at")
    assert shown[1:] == [
        "offline: connected; 1 models: demo",
        "reachable: connected; 1 models: gpt-test",
    ]
    health = dict(ModelProvider.objects.values_list("slug", "health"))
    assert health == {"offline": "healthy", "reachable": "healthy", "gone": "failing"}


def test_a_missing_key_variable_is_reported_without_a_request(root_client, server, monkeypatch):
    monkeypatch.delenv("AWAKEN_TEST_NO_SUCH_KEY", raising=False)
    provider = openai_provider(server, api_key_env="AWAKEN_TEST_NO_SUCH_KEY")

    response = root_client.post(connection_url(provider), follow=True)

    [message] = messages_of(response)
    assert "environment variable 'AWAKEN_TEST_NO_SUCH_KEY'" in message and "is not set" in message
    assert server.paths == []
    provider.refresh_from_db()
    assert provider.health == Health.FAILING


def test_test_connection_needs_a_post_and_the_change_permission(client, server):
    provider = openai_provider(server)
    viewer = User.objects.create_user("staff", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_modelprovider"))
    client.force_login(viewer)

    assert client.get(connection_url(provider)).status_code == 405
    assert client.post(connection_url(provider)).status_code == 403
    page = client.get(change_url(provider)).content.decode()
    assert connection_url(provider) not in page
    assert server.paths == []
    provider.refresh_from_db()
    assert provider.health == Health.UNKNOWN
