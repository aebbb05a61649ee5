"""The authorization matrix's sockets, SSE stream and A2A routes (their entries in
tests/access/matrix.py point here): team alpha's users never reach team beta's runs."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from a2a.utils.constants import VERSION_HEADER
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from awaken_site.asgi import application
from runs.realtime import DASHBOARD_GROUP
from runs.routing import websocket_urlpatterns
from runs.services.events import run_summary
from tests.factories import bearer

from .routes import a2a_routes
from .world import World, build_world

BASE = "http://testserver"


@pytest.fixture
def committed_world(transactional_db: None) -> World:
    """Both teams, committed (the consumers and the A2A server read on threads of their
    own)."""
    return build_world()


async def _connect(path: str, user: Any) -> tuple[WebsocketCommunicator, bool, Any]:
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
    communicator.scope["user"] = user
    connected, code = await communicator.connect()
    return communicator, connected, code


def test_run_socket_of_another_team_closes(committed_world: World) -> None:
    """ws/runs/<beta's run>/ closes with 4404 for alpha's operator; alpha's own run streams."""
    alpha, beta = committed_world["alpha"], committed_world["beta"]

    async def scenario() -> None:
        socket, connected, _ = await _connect(f"/ws/runs/{beta.run.pk}/", alpha.operator)
        if connected:
            closed = await socket.receive_output(timeout=2)
            assert closed == {"type": "websocket.close", "code": 4404}, closed
        await socket.disconnect()
        socket, connected, _ = await _connect(f"/ws/runs/{alpha.run.pk}/", alpha.operator)
        assert connected
        first = await socket.receive_json_from(timeout=2)
        assert first["type"] in ("event", "ready"), first
        await socket.disconnect()

    async_to_sync(scenario)()


def test_dashboard_socket_hears_only_its_team(committed_world: World) -> None:
    """A change of beta's run is not pushed to alpha's operator's dashboard; a change of
    alpha's is."""
    alpha, beta = committed_world["alpha"], committed_world["beta"]
    beta_summary, alpha_summary = run_summary(beta.run), run_summary(alpha.run)
    layer = get_channel_layer()

    async def scenario() -> None:
        socket, connected, _ = await _connect("/ws/dashboard/", alpha.operator)
        assert connected
        assert await socket.receive_json_from(timeout=2) == {"type": "ready"}
        message = {"type": "run.changed"}
        await layer.group_send(DASHBOARD_GROUP, {**message, "run": beta_summary})
        await layer.group_send(DASHBOARD_GROUP, {**message, "run": alpha_summary})
        received = [await socket.receive_json_from(timeout=2)]
        while not await socket.receive_nothing(timeout=0.3):
            received.append(await socket.receive_json_from(timeout=2))
        await socket.disconnect()
        text = json.dumps(received)
        assert str(beta.run.pk) not in text, received
        assert str(alpha.run.pk) in text, received

    async_to_sync(scenario)()


def test_event_stream_of_another_teams_run_is_404(committed_world: World) -> None:
    alpha, beta = committed_world["alpha"], committed_world["beta"]
    client = bearer(alpha.token)
    response = client.get(f"/api/v1/runs/{beta.run.pk}/events/stream")
    assert response.status_code == 404, response.status_code
    response = client.get(f"/api/v1/runs/{alpha.run.pk}/events/stream?follow=0")
    assert response.status_code == 200, response.status_code
    response.close()


# --- A2A --------------------------------------------------------------------------------


def _a2a(method: str, path: str, token: str | None, body: Any = None) -> httpx.Response:
    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=application)
        headers = {VERSION_HEADER: "1.0"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        async with httpx.AsyncClient(transport=transport, base_url=BASE, headers=headers) as http:
            return await http.request(method, path, json=body)

    return async_to_sync(call)()


def _get_task(slug: str, task_id: Any, token: str) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": str(task_id)}}
    response = _a2a("POST", f"/a2a/{slug}/jsonrpc", token, body)
    try:
        return {"status": response.status_code, **response.json()}
    except ValueError:
        return {"status": response.status_code, "text": response.text}


def test_a2a_task_of_another_team_is_not_found(committed_world: World) -> None:
    """GetTask (JSON-RPC) and GET tasks/<id> (HTTP+JSON) of beta's run with alpha's token
    find no task, through beta's agent or alpha's; alpha's own run is found."""
    alpha, beta = committed_world["alpha"], committed_world["beta"]
    own = _get_task(alpha.agent.slug, alpha.run.pk, alpha.token)
    assert own.get("result", {}).get("id") == str(alpha.run.pk), own
    for slug in (beta.agent.slug, alpha.agent.slug):
        answer = _get_task(slug, beta.run.pk, alpha.token)
        assert "result" not in answer, answer
        assert str(beta.run.pk) not in json.dumps(answer) or "not found" in json.dumps(answer)
        response = _a2a("GET", f"/a2a/{slug}/tasks/{beta.run.pk}", alpha.token)
        assert response.status_code in (404, 403) or "not found" in response.text.lower(), (
            slug,
            response.status_code,
            response.text[:300],
        )
        assert beta.run.status not in response.text or response.status_code == 404
    listing = _a2a("GET", f"/a2a/{beta.agent.slug}/tasks", alpha.token)
    assert str(beta.run.pk) not in listing.text, listing.text[:300]


# --- another team's ids answer as unknown ones ----------------------------------------------

UNKNOWN_RUN = "0190a0a0-0000-7000-8000-0000000000a1"
UNKNOWN_THREAD = "0190a0a0-0000-7000-8000-0000000000a2"


def _unknown_names(beta: Any) -> dict[str, str]:
    """beta's ids -> unknown ids of the same kind."""
    return {
        str(beta.run.pk): UNKNOWN_RUN,
        str(beta.thread.pk): UNKNOWN_THREAD,
        beta.agent.slug: beta.agent.slug.replace("beta", "zeta"),
    }


def _as_beta(text: str, names: dict[str, str]) -> str:
    for beta_id, unknown in names.items():
        text = text.replace(unknown, beta_id)
    return text


def _send_message(context_id: str = "", task_id: str = "") -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "ROLE_USER",
        "messageId": "m-oracle",
        "parts": [{"text": "hi"}],
    }
    if context_id:
        message["contextId"] = context_id
    if task_id:
        message["taskId"] = task_id
    return {"message": message, "configuration": {"returnImmediately": True}}


def _rpc_body(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def _a2a_calls(alpha: Any, run: str, thread: str, agent: str) -> list[tuple[str, str, Any]]:
    """(method, path, body) of the A2A calls that name a task, a context or an agent."""
    rpc = f"/a2a/{alpha.agent.slug}/jsonrpc"
    rest = f"/a2a/{alpha.agent.slug}"
    return [
        ("POST", rpc, _rpc_body("GetTask", {"id": run})),
        ("POST", rpc, _rpc_body("CancelTask", {"id": run})),
        ("POST", rpc, _rpc_body("SendMessage", _send_message(task_id=run))),
        ("POST", rpc, _rpc_body("SendMessage", _send_message(context_id=thread))),
        ("GET", f"{rest}/tasks/{run}", None),
        ("POST", f"{rest}/tasks/{run}:cancel", None),
        ("POST", f"{rest}/message:send", _send_message(context_id=thread)),
        ("POST", f"{rest}/message:send", _send_message(task_id=run)),
        ("POST", f"/a2a/{agent}/jsonrpc", _rpc_body("GetTask", {"id": run})),
        ("GET", f"/a2a/{agent}/tasks", None),
    ]


def test_a2a_answers_another_teams_ids_as_unknown_ones(committed_world: World) -> None:
    """For each role's token, every A2A call naming beta's task, context (thread) or agent
    answers as the same call naming an unknown one: status and body, but for the id."""
    alpha, beta = committed_world["alpha"], committed_world["beta"]
    names = _unknown_names(beta)
    beta_calls = _a2a_calls(alpha, str(beta.run.pk), str(beta.thread.pk), beta.agent.slug)
    unknown_calls = _a2a_calls(alpha, UNKNOWN_RUN, UNKNOWN_THREAD, names[beta.agent.slug])
    failures = []
    for role, token in committed_world.role_tokens.items():
        for (method, path, body), (_, unknown_path, unknown_body) in zip(
            beta_calls, unknown_calls, strict=True
        ):
            beta_answer = _a2a(method, path, token, body)
            unknown_answer = _a2a(method, unknown_path, token, unknown_body)
            seen = (beta_answer.status_code, beta_answer.text)
            expected = (unknown_answer.status_code, _as_beta(unknown_answer.text, names))
            if seen != expected:
                failures.append(f"{role} {method} {path} {body}: beta's {seen}, unknown {expected}")
    assert not failures, "\n".join(failures)


def test_a2a_answers_an_anonymous_caller_alike_for_any_agent_slug(
    committed_world: World, settings: Any
) -> None:
    """With the cards not public, every A2A route naming an agent answers a caller without
    a (valid) token the same for an agent that is served, another team's and an unknown
    slug: nothing tells which agents exist."""
    settings.AWAKEN_A2A_PUBLIC_CARDS = False
    alpha, beta = committed_world["alpha"], committed_world["beta"]
    unknown = beta.agent.slug.replace("beta", "zeta")
    ids = {"{id}": UNKNOWN_RUN, "{push_id}": "push-1", "{tenant}": "tenant-1"}
    failures = []
    routes = [route for route in a2a_routes() if "{agent}" in route.pattern]
    assert routes
    for route in routes:
        methods = route.key.split(" ", 1)[0].removeprefix("a2a:").split(",")
        path = route.pattern
        for name, value in ids.items():
            path = path.replace(name, value)
        body = _rpc_body("GetTask", {"id": UNKNOWN_RUN}) if path.endswith("/jsonrpc") else {}
        for method in methods:
            for token in (None, "awk_nope_nope"):
                answers = {}
                for slug in (alpha.agent.slug, beta.agent.slug, unknown):
                    response = _a2a(method, path.replace("{agent}", slug), token, body)
                    text = response.text.replace(slug, "<slug>")
                    answers[slug] = (response.status_code, text)
                if len(set(answers.values())) != 1:
                    failures.append(f"{method} {route.pattern} token={token}: {answers}")
    assert not failures, "\n".join(failures)


def test_streams_answer_another_teams_run_as_an_unknown_one(committed_world: World) -> None:
    """The run websocket closes, and the event stream answers, for beta's run exactly as
    for an unknown run id, whatever alpha's user's role."""
    beta = committed_world["beta"]
    names = _unknown_names(beta)

    async def socket_answer(run_id: str, user: Any) -> Any:
        socket, connected, code = await _connect(f"/ws/runs/{run_id}/", user)
        answer = (connected, code, await socket.receive_output(timeout=2) if connected else None)
        await socket.disconnect()
        return answer

    failures = []
    for role, user in committed_world.roles.items():
        beta_close = async_to_sync(socket_answer)(str(beta.run.pk), user)
        unknown_close = async_to_sync(socket_answer)(UNKNOWN_RUN, user)
        if beta_close != unknown_close:
            failures.append(f"{role} ws/runs: beta's {beta_close}, unknown {unknown_close}")
        client = bearer(committed_world.role_tokens[role])
        seen = client.get(f"/api/v1/runs/{beta.run.pk}/events/stream")
        unknown = client.get(f"/api/v1/runs/{UNKNOWN_RUN}/events/stream")
        pair = (seen.status_code, seen.content.decode())
        expected = (unknown.status_code, _as_beta(unknown.content.decode(), names))
        if pair != expected:
            failures.append(f"{role} events/stream: beta's {pair}, unknown {expected}")
    assert not failures, "\n".join(failures)
