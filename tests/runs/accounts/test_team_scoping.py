"""Team scoping of the runs pages, partials, actions, exports and the websockets: a user
of team A never sees team B's runs, threads, tickets or audit entries, and gets 404 on
B's objects; an action needs the role in the object's team; site-wide users see all."""

from __future__ import annotations

import json

import httpx
import pytest
from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from agents.models import Agent
from awaken_site.asgi import application
from common.models import AuditEntry, Membership
from runs import consumers
from runs.models import Run, Thread, Ticket
from runs.realtime import DASHBOARD_GROUP, event_messages
from runs.routing import websocket_urlpatterns
from runs.services.events import run_summary
from tests.factories import (
    AgentFactory,
    team,
    team_member,
    token_for,
    user_with_role,
    waiting_run,
)
from tests.runs.a2a_client import REFUSED, A2AClient, message
from tests.runs.a2a_client import run as a2a_run

pytestmark = pytest.mark.django_db


def in_team(run: Run, slug: str) -> Run:
    """`run` (its agent, its thread, its audit rows) moved to team `slug`."""
    row = team(slug)
    Agent.objects.filter(pk=run.agent_id).update(team=row)
    Thread.objects.filter(pk=run.thread_id).update(team=row)
    AuditEntry.objects.filter(run_id=run.pk).update(team=row)
    return Run.objects.select_related("agent").get(pk=run.pk)


@pytest.fixture
def two_runs():
    """A waiting run in team "alpha" and one in team "beta", each with a pending ticket."""
    a = in_team(waiting_run("alpha note"), "alpha")
    b = in_team(waiting_run("beta note"), "beta")
    return a, b


def _ticket(run: Run) -> Ticket:
    return Ticket.objects.get(run=run, status=Ticket.Status.PENDING)


def _login(client, user):
    client.force_login(user)
    return client


def test_lists_leave_out_another_teams_rows(client, two_runs):
    a, b = two_runs
    _login(client, team_member("operator", "alpha"))
    runs = client.get("/runs/").content.decode()
    assert str(a.pk) in runs and str(b.pk) not in runs
    threads = client.get("/threads/").content.decode()
    assert str(a.thread_id) in threads and str(b.thread_id) not in threads
    inbox = client.get("/inbox/").content.decode()
    assert "alpha note" in inbox and "beta note" not in inbox
    export = client.get("/runs/export.csv")
    body = b"".join(export.streaming_content).decode()
    assert str(a.pk) in body and str(b.pk) not in body


def test_audit_page_and_export_show_only_the_teams_entries(client, two_runs):
    a, b = two_runs
    AuditEntry.objects.create(action="site.thing", actor_label="x")  # no team
    _login(client, team_member("admin", "alpha"))
    page = client.get("/audit/").content.decode()
    assert str(a.pk) in page and str(b.pk) not in page and "site.thing" not in page
    export = b"".join(client.get("/audit/export.csv").streaming_content).decode()
    assert str(a.pk) in export and str(b.pk) not in export and "site.thing" not in export


def test_another_teams_objects_answer_404(client, two_runs):
    _, b = two_runs
    _login(client, team_member("operator", "alpha"))
    ticket = _ticket(b)
    for url in [
        f"/runs/{b.pk}/",
        f"/runs/{b.pk}/row",
        f"/runs/{b.pk}/export.json",
        f"/threads/{b.thread_id}/",
        f"/threads/{b.thread_id}/messages",
    ]:
        assert client.get(url).status_code == 404, url
    assert client.post(f"/tickets/{ticket.pk}/decide", {"action": "approve"}).status_code == 404
    assert client.post(f"/runs/{b.pk}/cancel").status_code == 404
    ticket.refresh_from_db()
    assert ticket.status == Ticket.Status.PENDING
    assert Run.objects.get(pk=b.pk).status == Run.Status.WAITING


def test_a_viewer_in_one_team_and_operator_in_another_decides_only_where_operator(client, two_runs):
    a, b = two_runs
    user = team_member("viewer", "alpha", username="mixed")
    Membership.objects.create(team=team("beta"), user=user, role="operator")
    _login(client, user)
    page_a = client.get(f"/runs/{a.pk}/")
    assert page_a.status_code == 200 and page_a.context["can"]["decide"] is False
    refused = client.post(f"/tickets/{_ticket(a).pk}/decide", {"action": "approve"})
    assert refused.status_code == 403
    assert _ticket(a).status == Ticket.Status.PENDING
    page_b = client.get(f"/runs/{b.pk}/")
    assert page_b.context["can"]["decide"] is True
    ticket_b = _ticket(b)
    done = client.post(f"/tickets/{ticket_b.pk}/decide", {"action": "approve"})
    assert done.status_code == 302
    ticket_b.refresh_from_db()
    assert ticket_b.status != Ticket.Status.PENDING


def test_the_composer_offers_and_accepts_only_the_users_teams_agents(client, two_runs):
    a, b = two_runs
    _login(client, team_member("operator", "alpha"))
    page = client.get("/threads/").content.decode()
    assert f'value="{a.agent.slug}"' in page and f'value="{b.agent.slug}"' not in page
    before = Run.objects.count()
    client.post("/threads/new", {"agent": b.agent.slug, "message": "hi"})
    assert Run.objects.count() == before  # another team's agent: as if unknown


def test_site_wide_users_still_see_every_team(client, two_runs):
    a, b = two_runs
    _login(client, user_with_role("viewer"))
    runs = client.get("/runs/").content.decode()
    assert str(a.pk) in runs and str(b.pk) in runs
    assert client.get(f"/runs/{b.pk}/").status_code == 200
    inbox = client.get("/inbox/").content.decode()
    assert "alpha note" in inbox and "beta note" in inbox


# --- websockets ------------------------------------------------------------------------------


async def _connect(path: str, user) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    assert connected
    return communicator


@pytest.mark.django_db(transaction=True)
def test_run_stream_of_another_teams_run_closes_4404(two_runs):
    a, b = two_runs
    user = team_member("operator", "alpha")

    async def scenario():
        communicator = await _connect(f"/ws/runs/{b.pk}/", user)
        closed = await communicator.receive_output(timeout=2)
        assert closed == {"type": "websocket.close", "code": 4404}
        own = await _connect(f"/ws/runs/{a.pk}/", user)
        frames = [await own.receive_json_from(timeout=2) for _ in range(a.last_event_seq + 1)]
        assert frames[-1]["type"] == "ready"
        await own.disconnect()

    async_to_sync(scenario)()


@pytest.mark.django_db(transaction=True)
def test_dashboard_socket_gets_only_its_teams_run_changes(two_runs, monkeypatch):
    a, b = two_runs
    user = team_member("operator", "alpha")
    messages = [event_messages(run.pk, [], run_summary(run)) for run in (b, a)]
    layer = InMemoryChannelLayer()
    monkeypatch.setattr(consumers, "get_channel_layer", lambda: layer)

    async def scenario():
        communicator = await _connect("/ws/dashboard/", user)
        assert (await communicator.receive_json_from(timeout=2))["type"] == "ready"
        for batch in messages:  # b's change first: it must not arrive
            for group, sent in batch:
                assert group == DASHBOARD_GROUP
                await layer.group_send(group, sent)
        got = json.loads(await communicator.receive_from(timeout=2))
        assert got["run"]["id"] == str(a.pk)
        assert await communicator.receive_nothing(timeout=0.3)
        await communicator.disconnect()

    async_to_sync(scenario)()


# --- A2A -------------------------------------------------------------------------------------


def _a2a(slug: str, user) -> A2AClient:
    return A2AClient("http://testserver", slug, token=token_for(user), app=application)


def _directory(user, settings) -> list[str]:
    settings.AWAKEN_A2A_PUBLIC_CARDS = False
    raw = token_for(user, "dir")

    async def fetch() -> httpx.Response:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            return await http.get("/a2a/", headers={"Authorization": f"Bearer {raw}"})

    response = a2a_run(fetch())
    assert response.status_code == 200
    return [row["slug"] for row in response.json()["agents"]]


@pytest.mark.django_db(transaction=True)
def test_a2a_another_teams_agent_and_tasks_are_not_found(settings):
    AgentFactory(slug="alpha-bot", team=team("alpha"))
    AgentFactory(slug="beta-bot", team=team("beta"))
    theirs = a2a_run(_a2a("beta-bot", user_with_role("operator")).send(message("hi"), wait=False))
    outsider = _a2a("beta-bot", team_member("operator", "alpha"))
    with pytest.raises(REFUSED) as refused:
        a2a_run(outsider.get(theirs.id))
    assert "404" in str(refused.value)
    with pytest.raises(REFUSED) as refused:
        a2a_run(outsider.send(message("hi"), wait=False))
    assert "404" in str(refused.value)
    assert Run.objects.count() == 1
    assert _directory(team_member("viewer", "alpha", username="dir-user"), settings) == [
        "alpha-bot"
    ]


@pytest.mark.django_db(transaction=True)
def test_a2a_role_is_the_one_in_the_agents_team():
    AgentFactory(slug="alpha-bot", team=team("alpha"))
    AgentFactory(slug="beta-bot", team=team("beta"))
    user = team_member("viewer", "alpha", username="mixed-a2a")
    Membership.objects.create(team=team("beta"), user=user, role="operator")
    with pytest.raises(REFUSED, match=r"permission denied.*runs\.start_run"):
        a2a_run(_a2a("alpha-bot", user).send(message("hi"), wait=False))
    task = a2a_run(_a2a("beta-bot", user).send(message("hi"), wait=False))
    assert Run.objects.get(pk=task.id).agent.slug == "beta-bot"
