"""Our published agents served over A2A (docs/a2a-serving.md).

The ASGI application sends HTTP requests under /a2a/ and the site's agent card here; the
server itself (`app.py`, with a2a-sdk and its Starlette routes) is loaded on the first
such request, so processes that never serve A2A never import the SDK.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings

ASGIApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]
CARD_PATH = "/.well-known/agent-card.json"
PREFIX = "/a2a/"
# where a client given `/a2a/<slug>` (no trailing slash) resolves the card relative to it
BESIDE_CARD_PATH = PREFIX.rstrip("/") + CARD_PATH


def is_a2a_path(path: str) -> bool:
    return path == CARD_PATH or path.startswith(PREFIX) or path == PREFIX.rstrip("/")


def with_a2a(django_app: ASGIApp) -> ASGIApp:
    """HTTP requests under /a2a/ and the site's agent card go to the A2A server, the rest
    to Django (everything to Django when AWAKEN_A2A_SERVE is "none")."""
    if "none" in settings.AWAKEN_A2A_SERVE:
        return django_app
    served: list[ASGIApp] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and is_a2a_path(scope["path"]):
            if not served:
                served.append(importlib.import_module("runs.a2a_server.app").a2a_app())
            await served[0](scope, receive, send)
        else:
            await django_app(scope, receive, send)

    return app
