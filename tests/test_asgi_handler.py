"""awaken_site/asgi_handler.py: a page or API request through the site's ASGI application
runs its middleware and view in one thread hop (Django's own async chain took one per
classic middleware method)."""

from __future__ import annotations

from unittest import mock

import httpx
import pytest
from asgiref.sync import SyncToAsync, async_to_sync
from django.core.asgi import get_asgi_application

from awaken_site.asgi import application
from tests.factories import user_with_role

pytestmark = pytest.mark.django_db(transaction=True)


def hops_of(app, path: str, **headers: str) -> tuple[int, httpx.Response]:
    """The `sync_to_async` calls one GET made, and its response."""
    calls = 0
    original = SyncToAsync.__call__

    async def counted(self, *args, **kwargs):
        nonlocal calls
        calls += 1
        return await original(self, *args, **kwargs)

    async def get() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
            return await c.get(path, headers=headers)

    with mock.patch.object(SyncToAsync, "__call__", counted):
        response = async_to_sync(get)()
    return calls, response


def test_a_page_costs_one_hop_where_django_s_async_chain_took_many(client):
    user = user_with_role("operator", "olive")
    client.force_login(user)
    cookie = {"Cookie": f"sessionid={client.cookies['sessionid'].value}"}
    ours, response = hops_of(application, "/runs/", **cookie)
    stock, stock_response = hops_of(get_asgi_application(), "/runs/", **cookie)
    assert response.status_code == stock_response.status_code == 200
    assert b"<h1>Runs" in response.content
    # ours: the request's one hop, plus what the handler does around every request
    # (the request signals, closing the response) that Django's does as well
    assert ours <= stock - 10, (ours, stock)
