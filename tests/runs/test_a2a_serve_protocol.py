"""The A2A server's answers at the protocol's edges, on the wire (raw JSON-RPC and
HTTP+JSON through httpx's ASGI transport into the site's ASGI application): ListTasks'
page size, the extended card that is not offered, the gate's refusals as google.rpc.Status
on HTTP+JSON, and the card where a client resolving it relative to an agent's address
without a trailing slash (as @a2a-js/sdk does, `new URL(".well-known/agent-card.json",
base)`) looks for it."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from a2a.utils.constants import VERSION_HEADER

from awaken_site.asgi import application
from runs.models import Run
from tests.factories import AgentFactory, token_for, user_with_role
from tests.runs.a2a_client import run

pytestmark = pytest.mark.django_db(transaction=True)
BASE = "http://testserver"


@pytest.fixture
def operator_token() -> str:
    return token_for(user_with_role("operator", "a2a-edges"))


def call(
    method: str, path: str, token: str | None = None, body: Any = None, **params: Any
) -> httpx.Response:
    async def send() -> httpx.Response:
        headers = {VERSION_HEADER: "1.0"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url=BASE, headers=headers) as h:
            return await h.request(method, path, json=body, params=params or None)

    return run(send())


def rpc(slug: str, token: str, method: str, params: dict[str, Any]) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    return call("POST", f"/a2a/{slug}/jsonrpc", token, body)


def assert_status(response: httpx.Response, code: int, status: str, reason: str) -> str:
    """A google.rpc.Status body (as a2a-sdk's HTTP+JSON errors are); returns its message."""
    assert response.status_code == code, response.text
    error = response.json()["error"]
    assert (error["code"], error["status"]) == (code, status), error
    assert error["details"][0]["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
    assert error["details"][0]["reason"] == reason, error
    assert isinstance(error["message"], str) and error["message"]
    return str(error["message"])


# --- ListTasks' page size ---------------------------------------------------------------------


@pytest.mark.parametrize("size", [-5, 0, 101])
def test_a_page_size_outside_1_to_100_is_invalid_params(operator_token: str, size: int) -> None:
    AgentFactory(slug="pager")
    answer = rpc("pager", operator_token, "ListTasks", {"pageSize": size})
    assert answer.status_code == 200, answer.text
    error = answer.json()["error"]
    assert error["code"] == -32602 and "page size" in error["message"], error
    rest = call("GET", "/a2a/pager/tasks", operator_token, pageSize=size)
    assert "page size" in assert_status(rest, 400, "INVALID_ARGUMENT", "INVALID_PARAMS")


def test_page_sizes_in_range_and_the_default(operator_token: str) -> None:
    agent = AgentFactory(slug="pages")
    for text in ("one", "two", "three"):
        rpc("pages", operator_token, "SendMessage", _message(text))
    assert Run.objects.filter(agent=agent).count() == 3
    one = rpc("pages", operator_token, "ListTasks", {"pageSize": 1}).json()["result"]
    assert len(one["tasks"]) == 1 and one["pageSize"] == 1 and one["nextPageToken"]
    rest = call("GET", "/a2a/pages/tasks", operator_token, pageSize=2).json()
    assert len(rest["tasks"]) == 2 and rest["pageSize"] == 2
    default = rpc("pages", operator_token, "ListTasks", {}).json()["result"]
    assert len(default["tasks"]) == 3 and default["pageSize"] == 50


def _message(text: str) -> dict[str, Any]:
    return {
        "message": {
            "role": "ROLE_USER",
            "messageId": str(uuid.uuid4()),
            "parts": [{"text": text}],
        },
        "configuration": {"returnImmediately": True},
    }


# --- the extended card ----------------------------------------------------------------------------


def test_the_extended_card_is_an_unsupported_operation(operator_token: str) -> None:
    AgentFactory(slug="plain")
    card = call("GET", "/a2a/plain/.well-known/agent-card.json").json()
    assert not card["capabilities"].get("extendedAgentCard")
    answer = rpc("plain", operator_token, "GetExtendedAgentCard", {})
    assert answer.json()["error"]["code"] == -32004, answer.text
    rest = call("GET", "/a2a/plain/extendedAgentCard", operator_token)
    assert rest.json()["error"]["details"][0]["reason"] == "UNSUPPORTED_OPERATION", rest.text


# --- the gate's refusals ---------------------------------------------------------------------------


def test_the_gates_refusals_are_google_rpc_status(settings: Any, operator_token: str) -> None:
    AgentFactory(slug="gated")
    refused = call("GET", "/a2a/gated/tasks")
    assert "Bearer" in assert_status(refused, 401, "UNAUTHENTICATED", "UNAUTHENTICATED")
    assert refused.headers["WWW-Authenticate"] == 'Bearer realm="a2a"'
    bad = call("GET", "/a2a/gated/tasks", "awk_nope_nope")
    assert_status(bad, 401, "UNAUTHENTICATED", "UNAUTHENTICATED")
    # a call to an unknown agent counts against its token's rate as any other
    prober = token_for(user_with_role("operator", "a2a-prober"))
    missing = call("GET", "/a2a/nobody/tasks", prober)
    assert "nobody" in assert_status(missing, 404, "NOT_FOUND", "AGENT_NOT_FOUND")
    wrong_host = run(_from_host("http://evil.example", "/a2a/gated/tasks"))
    assert_status(wrong_host, 400, "INVALID_ARGUMENT", "INVALID_HOST")
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"api_token": "1/min"},
    }
    assert call("GET", "/a2a/gated/tasks", operator_token).status_code == 200
    limited = call("GET", "/a2a/gated/tasks", operator_token)
    assert "retry in" in assert_status(limited, 429, "RESOURCE_EXHAUSTED", "RATE_LIMITED")
    assert int(limited.headers["Retry-After"]) >= 1
    # the JSON-RPC binding is refused with the same HTTP status and body
    jsonrpc = call("POST", "/a2a/gated/jsonrpc", None, {"jsonrpc": "2.0", "id": 1})
    assert_status(jsonrpc, 401, "UNAUTHENTICATED", "UNAUTHENTICATED")


async def _from_host(base: str, path: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url=base) as http:
        return await http.get(path)


# --- an agent's address without a trailing slash ---------------------------------------------------


def test_the_card_next_to_the_agents_address_when_one_agent_is_served(settings: Any) -> None:
    """A client given `…/a2a/assistant` resolves the card to
    `/a2a/.well-known/agent-card.json`: with one agent served, that is its card."""
    AgentFactory(slug="assistant", name="Assistant")
    beside = call("GET", "/a2a/.well-known/agent-card.json")
    assert beside.status_code == 200, beside.text
    assert beside.json() == call("GET", "/a2a/assistant/.well-known/agent-card.json").json()
    AgentFactory(slug="other")
    settings.AWAKEN_A2A_SERVE = ["assistant"]
    assert call("GET", "/a2a/.well-known/agent-card.json").json()["name"] == "Assistant"


def test_with_several_agents_served_the_card_beside_names_the_addresses() -> None:
    """It cannot know which agent the client meant: a 404 that says how to write the
    address, never another agent's card."""
    AgentFactory(slug="alpha")
    AgentFactory(slug="beta")
    beside = call("GET", "/a2a/.well-known/agent-card.json")
    message = assert_status(beside, 404, "NOT_FOUND", "AGENT_NOT_FOUND")
    assert "trailing slash" in message
    assert f"{BASE}/a2a/alpha/" in message and f"{BASE}/a2a/beta/" in message
    assert call("GET", "/a2a/beta/.well-known/agent-card.json").json()["name"] == "beta"
