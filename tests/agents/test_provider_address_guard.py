"""The SSRF guard on model providers: a base URL whose host is (or resolves to) a
loopback, link-local (cloud metadata), private or other non-public address is refused when
saved and again when called, unless AWAKEN_PROVIDERS_ALLOW_PRIVATE allows it (true, or the
addresses and networks named); the connection goes only to the address that was vetted.

The provider is the real local OpenAI-compatible server (tests/agents/openai_server.py);
DNS names are answered by a stand-in resolver for the names these tests make up (every
other name and address resolves as usual)."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.urls import reverse

from agents.models import Health, ModelProvider
from agents.providers.openai_client import OpenAIChatClient
from awaken_site.env import env_bool_or_networks
from runs.models import Run
from runs.runtime import netguard
from runs.runtime.netguard import AddressPolicy, in_networks, parse_networks
from runs.runtime.ports import CancellationToken, InferenceRequest, ModelError
from runs.runtime.types import Message

from .openai_server import FakeOpenAIServer, text_reply
from .providers_support import agent_on, openai_provider, priced_model, provider_form, run_to_end

PUBLIC = "93.184.216.34"
REAL_GETADDRINFO = socket.getaddrinfo


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        yield srv


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """`resolver(name, first, then...)`: `name` resolves to the addresses in `first`, the
    next lookups to the next lists (the last one repeats), as a DNS record that changes."""
    answers: dict[str, list[list[str]]] = {}

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        key = host.decode() if isinstance(host, bytes) else str(host)
        if key not in answers:
            return REAL_GETADDRINFO(host, port, *args, **kwargs)
        queue = answers[key]
        addresses = queue.pop(0) if len(queue) > 1 else queue[0]
        infos: list[Any] = []
        for address in addresses:
            if ":" in address:
                infos.append((socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, port, 0, 0)))
            else:
                infos.append((socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port)))
        return infos

    monkeypatch.setattr(netguard.socket, "getaddrinfo", getaddrinfo)

    def answer(name: str, *lookups: list[str]) -> None:
        answers[name] = [list(addresses) for addresses in lookups]

    return answer


def add_url() -> str:
    return reverse("admin:agents_modelprovider_add")


def save(root_client: Any, base_url: str, slug: str = "guarded") -> tuple[int, str]:
    response = root_client.post(add_url(), provider_form(slug=slug, base_url=base_url))
    return response.status_code, response.content.decode()


# --- the policy ---------------------------------------------------------------------------------


def test_the_setting_is_false_true_or_addresses_and_networks(monkeypatch: pytest.MonkeyPatch):
    for raw, expected in [
        (None, False),
        ("", False),
        ("false", False),
        ("1", True),
        ("true", True),
        ("127.0.0.1, ::1,10.0.0.0/8", ["127.0.0.1", "::1", "10.0.0.0/8"]),
    ]:
        if raw is None:
            monkeypatch.delenv("AWAKEN_TEST_ALLOW", raising=False)
        else:
            monkeypatch.setenv("AWAKEN_TEST_ALLOW", raw)
        assert env_bool_or_networks("AWAKEN_TEST_ALLOW") == expected, raw
    for bad in ("localhost", "10.0.0.1/8", "127.0.0.1,ollama"):
        monkeypatch.setenv("AWAKEN_TEST_ALLOW", bad)
        with pytest.raises(ImproperlyConfigured, match="AWAKEN_TEST_ALLOW must be"):
            env_bool_or_networks("AWAKEN_TEST_ALLOW")


def test_allowed_networks_match_addresses_and_their_ipv4_mapped_forms():
    networks = parse_networks(["127.0.0.1", "10.20.0.0/16", "fd00::/8"])
    assert in_networks("127.0.0.1", networks) and in_networks("::ffff:127.0.0.1", networks)
    assert in_networks("10.20.3.4", networks) and in_networks("::ffff:10.20.3.4", networks)
    assert in_networks("fd00::5", networks)
    for other in ("127.0.0.2", "10.21.0.1", "::1", "169.254.169.254", "::ffff:169.254.169.254"):
        assert not in_networks(other, networks), other
    # 6to4 and NAT64 reach their IPv4 address through a gateway: not the allowed host
    assert not in_networks("2002:7f00:1::1", networks)
    assert not in_networks("64:ff9b::7f00:1", networks)
    with pytest.raises(ValueError, match="'ollama' is not an IP address or network"):
        AddressPolicy.from_setting(["127.0.0.1", "ollama"])


# --- when saved -----------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("base_url", "reason"),
    [
        ("http://127.0.0.1:11434/v1", "127.0.0.1 is loopback"),
        ("http://169.254.169.254/v1", "169.254.169.254 is link-local"),
        ("http://10.1.2.3:8000/v1", "10.1.2.3 is private"),
        ("http://[::1]:8000/v1", "::1 is loopback"),
        ("http://[::ffff:127.0.0.1]:8000/v1", "127.0.0.1 is loopback (embedded in ::ffff:7f00:1)"),
        ("http://[::ffff:169.254.169.254]/v1", "169.254.169.254 is link-local"),
        ("http://ollama.guard.test:11434/v1", "127.0.0.1 is loopback"),
        ("http://metadata.guard.test/v1", "169.254.169.254 is link-local"),
        ("http://vllm.guard.test/v1", "10.0.0.7 is private"),
        ("http://v6.guard.test/v1", "::1 is loopback"),
        ("http://mixed.guard.test/v1", "10.0.0.7 is private"),
    ],
)
def test_a_non_public_base_url_is_refused_when_saved(
    root_client: Any, resolver: Callable[..., None], base_url: str, reason: str
):
    resolver("ollama.guard.test", ["127.0.0.1"])
    resolver("metadata.guard.test", ["169.254.169.254"])
    resolver("vllm.guard.test", ["10.0.0.7"])
    resolver("v6.guard.test", ["::1"])
    resolver("mixed.guard.test", [PUBLIC, "10.0.0.7"])  # one private address is enough
    status, page = save(root_client, base_url)
    assert status == 200
    assert "Refused:" in page and reason in page
    assert "AWAKEN_PROVIDERS_ALLOW_PRIVATE" in page
    assert not ModelProvider.objects.filter(slug="guarded").exists()


@pytest.mark.django_db
def test_the_opt_in_allows_what_it_names_and_nothing_else(
    root_client: Any, settings: Any, resolver: Callable[..., None]
):
    resolver("ollama.guard.test", ["127.0.0.1"])
    settings.AWAKEN_PROVIDERS_ALLOW_PRIVATE = ["127.0.0.1", "::1"]
    assert save(root_client, "http://localhost:11434/v1", "local-ollama")[0] == 302
    assert save(root_client, "http://ollama.guard.test:11434/v1", "named")[0] == 302
    assert save(root_client, "http://[::1]:8000/v1", "v6")[0] == 302
    assert save(root_client, "http://[::ffff:127.0.0.1]:8000/v1", "mapped")[0] == 302
    for url in ("http://169.254.169.254/v1", "http://10.1.2.3/v1", "http://127.0.0.2/v1"):
        status, page = save(root_client, url, "still-refused")
        assert status == 200 and "Refused:" in page, url
    settings.AWAKEN_PROVIDERS_ALLOW_PRIVATE = True
    assert save(root_client, "http://10.1.2.3/v1", "anything")[0] == 302
    assert ModelProvider.objects.filter(slug="still-refused").count() == 0


@pytest.mark.django_db
def test_a_public_host_and_a_host_that_does_not_resolve_here_are_saved(
    root_client: Any, resolver: Callable[..., None]
):
    resolver("api.guard.test", [PUBLIC])
    assert save(root_client, "https://api.guard.test/v1", "public")[0] == 302
    # the guard refuses addresses it sees; every connection is vetted again when made
    assert save(root_client, "https://not-yet.invalid/v1", "unresolved")[0] == 302
    # a scripted provider never connects: its URL is not looked at
    scripted = provider_form(slug="offline", kind="scripted", base_url="http://10.0.0.1/")
    assert root_client.post(add_url(), scripted).status_code == 302


# --- when called ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_provider_saved_before_is_refused_at_call_time(server: FakeOpenAIServer, root_client):
    """A row that bypassed the form (saved before the guard, or by a script): the run
    fails with the reason, nothing reaches the address, the provider shows failing."""
    server.always(text_reply("from the loopback server"))
    provider = openai_provider(server)
    run = run_to_end(agent_on(priced_model(provider)))
    assert (run.status, run.status_reason) == (Run.Status.DONE, "error")
    message = run.error_payload["message"]
    assert f"refused to call provider at {server.base_url}" in message
    assert "127.0.0.1 is loopback" in message and "AWAKEN_PROVIDERS_ALLOW_PRIVATE" in message
    assert server.request_count == 0
    provider.refresh_from_db()
    assert provider.health == Health.FAILING and "127.0.0.1 is loopback" in provider.health_error
    check = root_client.post(
        reverse("admin:agents_modelprovider_test_connection", args=[provider.pk]), follow=True
    )
    assert "127.0.0.1 is loopback" in check.content.decode()
    assert server.request_count == 0


@pytest.mark.django_db
def test_a_name_resolving_to_this_machine_is_refused_then_reached_when_allowed(
    server: FakeOpenAIServer, settings: Any, resolver: Callable[..., None]
):
    """The name exists only in the stand-in resolver: the connection that reaches the
    server went to the address the guard vetted, not to a second lookup of the name."""
    resolver("llm.guard.test", ["127.0.0.1"])
    server.always(text_reply("hello from the named server"))
    provider = openai_provider(None, base_url=f"http://llm.guard.test:{server.port}/v1")
    agent = agent_on(priced_model(provider))
    refused = run_to_end(agent)
    assert refused.status_reason == "error"
    message = refused.error_payload["message"]
    assert "host 'llm.guard.test' resolves to a non-public address" in message
    assert server.request_count == 0
    settings.AWAKEN_PROVIDERS_ALLOW_PRIVATE = ["127.0.0.1"]
    reached = run_to_end(agent)
    assert (reached.status_reason, reached.final_output) == (
        "natural",
        "hello from the named server",
    )
    assert server.request_count == 1


def _request() -> InferenceRequest:
    return InferenceRequest(model="m", system_prompt="", messages=[Message.user("hi")], tools=[])


@pytest.mark.parametrize(
    ("policy", "first", "then"),
    [
        (AddressPolicy(), [PUBLIC], ["127.0.0.1"]),
        (AddressPolicy(), [PUBLIC], ["::ffff:127.0.0.1"]),
        (AddressPolicy.from_setting(["127.0.0.1"]), ["127.0.0.1"], ["169.254.169.254"]),
    ],
)
def test_a_dns_change_after_the_check_cannot_reach_a_refused_address(
    server: FakeOpenAIServer,
    resolver: Callable[..., None],
    policy: AddressPolicy,
    first: list[str],
    then: list[str],
):
    """The check before the call passes; the name then resolves elsewhere (DNS
    rebinding): the connection vets what it resolves to and refuses it."""
    resolver("rebind.guard.test", first, then)
    server.always(text_reply("never"))
    client = OpenAIChatClient(
        "m",
        "gpt-test",
        f"http://rebind.guard.test:{server.port}/v1",
        None,
        timeout=5,
        max_retries=0,
        address_policy=policy,
    )
    with pytest.raises(ModelError) as caught:
        list(client.stream(_request(), CancellationToken()))
    message = str(caught.value)
    assert message.startswith("cannot reach provider at http://rebind.guard.test:")
    assert "refused by the address guard" in message and "non-public address" in message
    assert server.request_count == 0
