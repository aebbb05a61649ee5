"""The A2A server: the SDK's Starlette routes for both bindings, mounted per agent next to
Django in the ASGI application (awaken_site/asgi.py), behind a gate that checks the Host
header, finds the agent and authenticates the API token.

    GET  /.well-known/agent-card.json             the default agent's card
    GET  /a2a/                                    the served agents and their cards
    GET  /a2a/<slug>/.well-known/agent-card.json  an agent's card
    GET  /a2a/.well-known/agent-card.json         the card a client given /a2a/<slug>
                                                  (no trailing slash) asks for
    POST /a2a/<slug>/jsonrpc                      JSON-RPC binding
    *    /a2a/<slug>/message:send, /tasks/…       HTTP+JSON binding

Cards are public unless AWAKEN_A2A_PUBLIC_CARDS is false; every other call needs
`Authorization: Bearer <API token>`, and the token's user's role decides what it may do
(runs/a2a_server/actions.py). The gate's refusals are google.rpc.Status bodies, as the
SDK's HTTP+JSON errors are.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import create_jsonrpc_routes, create_rest_routes
from a2a.server.routes.common import DefaultServerCallContextBuilder
from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.conf import settings
from django.db import connection
from django.http.request import split_domain_port, validate_host
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route

from common.api.auth import TokenRateThrottle
from common.api.tokens import token_verify
from common.models import ApiToken
from runs.a2a_server import BESIDE_CARD_PATH, CARD_PATH, PREFIX, ASGIApp
from runs.a2a_server.actions import Caller
from runs.a2a_server.cards import agent_card, default_agent, sees, served_agent, served_agents
from runs.a2a_server.handler import RunsRequestHandler

REQUEST_ID_CHARS = 64
NAMED_MAX = 20  # agent addresses a refusal names


def _base_url(request: Request) -> str:
    scheme = request.url.scheme
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy and request.headers.get("x-forwarded-proto", "").lower() == "https":
        scheme = "https"
    return f"{scheme}://{request.headers.get('host', '')}"


async def _card(request: Request) -> Response:
    agent = request.scope["awaken"]["agent"]
    card = await sync_to_async(agent_card)(agent, _base_url(request))
    return JSONResponse(agent_card_to_dict(card), headers={"Cache-Control": "no-cache"})


async def _card_beside(request: Request) -> Response:
    """The card a client resolving it relative to an agent's address without a trailing
    slash asks for (`…/a2a/<slug>` + `.well-known/agent-card.json` is this path, the slug
    lost). With one agent served (to the caller) it is that agent's card; with several it
    cannot know which was meant, so it never answers another agent's card: a 404 that says
    how to write the address."""
    base = _base_url(request)
    caller = request.scope["awaken"].get("caller")
    agents = await sync_to_async(served_agents)(caller.user if caller else None)
    if len(agents) == 1:
        card = await sync_to_async(agent_card)(agents[0], base)
        return JSONResponse(agent_card_to_dict(card), headers={"Cache-Control": "no-cache"})
    addresses = ", ".join(f"{base}{PREFIX}{agent.slug}/" for agent in agents[:NAMED_MAX])
    if len(agents) > NAMED_MAX:
        addresses += f" and {len(agents) - NAMED_MAX} more: {base}{PREFIX} lists them"
    return _error(
        AGENT_NOT_FOUND,
        "no agent is named here: a client given an agent's address without a trailing slash "
        f"(…{PREFIX}<slug>) looks for its card here. Give the address with a trailing slash, "
        f"{PREFIX}<slug>/ (served: {addresses or 'none'}).",
    )


async def _directory(request: Request) -> Response:
    base = _base_url(request)
    caller = request.scope["awaken"].get("caller")  # none: the public directory
    agents = await sync_to_async(served_agents)(caller.user if caller else None)
    return JSONResponse(
        {
            "agents": [
                {
                    "slug": agent.slug,
                    "name": agent.name,
                    "card": f"{base}{PREFIX}{agent.slug}{CARD_PATH}",
                }
                for agent in agents
            ]
        }
    )


class CallContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's context, plus the agent and the caller the gate found."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state.get("headers", {}).pop("authorization", None)  # the token stays out
        context.state.update(request.scope["awaken"])
        return context


# The gate's refusals: (HTTP status, google.rpc.Code name, ErrorInfo reason).
INVALID_HOST = (400, "INVALID_ARGUMENT", "INVALID_HOST")
UNAUTHENTICATED = (401, "UNAUTHENTICATED", "UNAUTHENTICATED")
AGENT_NOT_FOUND = (404, "NOT_FOUND", "AGENT_NOT_FOUND")
RATE_LIMITED = (429, "RESOURCE_EXHAUSTED", "RATE_LIMITED")
ERROR_DOMAIN = "awaken-ops"


def _error(
    kind: tuple[int, str, str], message: str, headers: dict[str, str] | None = None
) -> Response:
    """A refusal in the shape of a2a-sdk's HTTP+JSON errors (a google.rpc.Status with a
    google.rpc.ErrorInfo detail), on both bindings: the gate answers before the request
    reaches a binding, and the HTTP status is what clients act on."""
    status, code, reason = kind
    detail = {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": reason,
        "domain": ERROR_DOMAIN,
        "metadata": {},
    }
    body = {"error": {"code": status, "status": code, "message": message, "details": [detail]}}
    return JSONResponse(body, status_code=status, headers=headers)


def _close_connection() -> None:
    """The request's thread ends with the request: its connection is closed (given back
    to the pool), whatever CONN_MAX_AGE says, so none is left behind in a dead thread."""
    if not connection.in_atomic_block:
        connection.close()


class Gate:
    """Host check, bearer authentication and agent lookup in front of the routes (the
    token before the agent, so a caller without one cannot tell which agents exist). Each
    request's database work runs on a thread of its own (as Django's handler does), and
    its connection is closed at the end."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        async with ThreadSensitiveContext():
            try:
                response = await self._admit(scope)
                if response is not None:
                    await response(scope, receive, send)
                else:
                    await self.app(scope, receive, send)
            finally:
                await sync_to_async(_close_connection)()

    async def _admit(self, scope: dict[str, Any]) -> Response | None:
        request = Request(scope)
        domain, _port = split_domain_port(request.headers.get("host", ""))
        if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
            return _error(INVALID_HOST, "invalid Host header")
        path: str = scope["path"]
        if path == CARD_PATH:
            slug: str | None = None  # the default agent
            rest = CARD_PATH
        elif path == BESIDE_CARD_PATH:
            slug, rest = "", ""  # public like the directory; the route finds the agent
        else:
            slug, _, rest = path[len(PREFIX) :].partition("/")
            rest = "/" + rest
        public = slug == "" or rest == CARD_PATH
        scope["awaken"] = {"agent": None}
        token: ApiToken | None = None
        if not (public and settings.AWAKEN_A2A_PUBLIC_CARDS):
            # the token first: an unauthenticated caller learns nothing of which agents
            # exist (an unknown slug answers as a served one)
            token = await sync_to_async(_token)(request)
            if token is None:
                return _error(
                    UNAUTHENTICATED,
                    "authentication required: send 'Authorization: Bearer <API token>'",
                    {"WWW-Authenticate": 'Bearer realm="a2a"'},
                )
            wait = await sync_to_async(_throttled)(token)
            if wait is not None:
                return _error(
                    RATE_LIMITED,
                    f"too many requests for this token: retry in {wait:.0f} s",
                    {"Retry-After": str(max(1, round(wait)))},
                )
        if slug is None:
            agent = await sync_to_async(default_agent)()
        else:
            agent = await sync_to_async(served_agent)(slug) if slug else None
        # another team's agent answers as if not served (its existence is not confirmed)
        if (
            agent is not None
            and token is not None
            and not await sync_to_async(sees)(token.user, agent)
        ):
            agent = None
        if agent is None and (slug or rest == CARD_PATH):
            named = f"agent {slug!r}" if slug else "agent"
            return _error(AGENT_NOT_FOUND, f"no {named} is served over A2A")
        scope["awaken"]["agent"] = agent
        if token is None:
            return None
        request_id = request.headers.get("x-request-id", "")[:REQUEST_ID_CHARS]
        scope["awaken"]["caller"] = Caller(token.user, token.name, request_id, agent)
        return None


def _token(request: Request) -> ApiToken | None:
    scheme, _, raw = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        return None
    return token_verify(raw.strip())


def _throttled(token: ApiToken) -> float | None:
    """The REST API's per-token throttle (API_THROTTLE_RATE, one window for both): the
    seconds to wait, or None. DRF's throttle reads the token from a request; this one is
    only that."""
    throttle = TokenRateThrottle()
    if throttle.allow_request(SimpleNamespace(auth=token, user=token.user), None):
        return None
    return throttle.wait() or 1.0


def a2a_app() -> ASGIApp:
    handler = RunsRequestHandler()
    builder = CallContextBuilder()
    per_agent = [
        Route(CARD_PATH, _card, methods=["GET"]),
        *create_jsonrpc_routes(handler, rpc_url="/jsonrpc", context_builder=builder),
        *create_rest_routes(handler, context_builder=builder),
    ]
    routes = [
        Route(CARD_PATH, _card, methods=["GET"]),
        Route(PREFIX, _directory, methods=["GET"]),
        Route(PREFIX.rstrip("/"), _directory, methods=["GET"]),
        Route(BESIDE_CARD_PATH, _card_beside, methods=["GET"]),
        Mount(PREFIX + "{agent}", routes=per_agent),
    ]
    return Gate(Starlette(routes=routes))
