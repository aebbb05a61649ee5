"""Every route the site answers, keyed for the authorization matrix.

Django's URL conf is walked recursively (namespaces and the admin's generated routes
included); the websocket routes come from `runs.routing`; the A2A routes come from the
Starlette application that `runs.a2a_server` mounts beside Django in the ASGI application.

Keys: a named Django route is `namespace:name` (or `name`); an unnamed one is `re:<its
full pattern>`; a websocket route is `ws:<pattern>`; an A2A route is `a2a:<METHODS> <path>`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from django.urls import URLPattern, URLResolver, get_resolver
from starlette.routing import Mount

from runs.a2a_server.app import a2a_app
from runs.routing import websocket_urlpatterns


@dataclass(frozen=True)
class Route:
    key: str
    pattern: str  # the full pattern, for messages


def _walk(patterns: list, prefix: str = "", namespace: str | None = None) -> Iterator[Route]:
    for item in patterns:
        if isinstance(item, URLResolver):
            inner = namespace
            if item.namespace:
                inner = f"{namespace}:{item.namespace}" if namespace else item.namespace
            yield from _walk(item.url_patterns, prefix + str(item.pattern), inner)
        elif isinstance(item, URLPattern):
            pattern = prefix + str(item.pattern)
            if item.name:
                key = f"{namespace}:{item.name}" if namespace else item.name
            else:
                key = f"re:{pattern}"
            yield Route(key, pattern)


def django_routes(urlconf: str | None = None) -> list[Route]:
    return list(_walk(get_resolver(urlconf).url_patterns))


def websocket_routes() -> list[Route]:
    return [Route(f"ws:{item.pattern}", str(item.pattern)) for item in websocket_urlpatterns]


def _starlette(routes: list, prefix: str = "") -> Iterator[Route]:
    for item in routes:
        if isinstance(item, Mount):
            yield from _starlette(item.routes, prefix + item.path)
        else:
            methods = ",".join(sorted(set(item.methods or ()) - {"HEAD"}))
            path = prefix + item.path
            yield Route(f"a2a:{methods} {path}", path)


def a2a_routes() -> list[Route]:
    gate = a2a_app()
    return list(_starlette(gate.app.routes))


def all_routes(urlconf: str | None = None) -> list[Route]:
    return django_routes(urlconf) + websocket_routes() + a2a_routes()
