"""Team admins configure only their team's agents, models, providers and endpoints, in
/admin/ and over the agents API; shared providers and endpoints are theirs to read, and a
frozen team's configuration changes for no one."""

from __future__ import annotations

import io
import re

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.urls import reverse

from agents.models import Agent, ModelProvider, RemoteEndpoint
from agents.services.agents import agent_publish
from common.audit import Actor
from common.errors import Frozen
from common.models import AuditEntry, Membership
from common.teams import team_freeze
from tests.api.helpers import assert_error
from tests.factories import (
    AgentFactory,
    ModelFactory,
    bearer,
    superuser,
    team,
    team_member,
    token_for,
    user_with_role,
)

pytestmark = pytest.mark.django_db

ROOT = Actor(label="root", source="cli")


@pytest.fixture
def world():
    """Teams a and b, each with a provider, a model, an endpoint and an agent; a shared
    provider (and its model) and a shared endpoint."""
    a, b = team("a"), team("b")
    rows = {"a": a, "b": b}
    for slug, owner in (("a", a), ("b", b), ("shared", None)):
        provider = ModelProvider.objects.create(slug=f"prov-{slug}", name=slug, team=owner)
        rows[f"provider_{slug}"] = provider
        rows[f"model_{slug}"] = ModelFactory(slug=f"model-{slug}", provider=provider)
        rows[f"endpoint_{slug}"] = RemoteEndpoint.objects.create(
            slug=f"ep-{slug}", name=slug, base_url="http://127.0.0.1:9/", team=owner
        )
    for slug in ("a", "b"):
        rows[f"agent_{slug}"] = AgentFactory(
            slug=f"agent-{slug}", team=rows[slug], model=rows[f"model_{slug}"]
        )
    return rows


def admin_of(slug: str) -> User:
    user = team_member("admin", slug, username=f"admin-{slug}")
    user.is_staff = True
    user.save()
    return user


@pytest.fixture
def a_admin(client):
    client.force_login(admin_of("a"))
    return client


def agent_form(agent: Agent, **fields) -> dict:
    return {
        "slug": agent.slug,
        "name": agent.name,
        "team": agent.team_id,
        "description": "",
        "model": agent.model_id,
        "system_prompt": "Be brief.",
        "tools": ["calculator"],
        "permission": '{"default_behavior": "allow", "rules": []}',
        "max_rounds": 8,
        "stop_conditions": "[]",
        "ticket_default_action": "reject",
        **fields,
    }


def options(page: str, field: str) -> list[str]:
    """The options of the form's select `field`, as "value:label" ("*" marks the chosen)."""
    select = re.search(rf'<select name="{field}"[^>]*>(.*?)</select>', page, re.S)
    assert select, f"no select {field}"
    return [
        f"{'*' if chosen else ''}{value}:{label}"
        for value, chosen, label in re.findall(
            r'<option value="([^"]*)"( selected)?>([^<]*)</option>', select.group(1)
        )
    ]


def url(name: str, *args) -> str:
    return reverse(f"admin:agents_{name}", args=args)


def test_a_team_admin_sees_and_edits_only_their_team_s_agents(a_admin, world):
    index = a_admin.get(reverse("admin:index")).content.decode()
    assert url("agent_changelist") in index and url("remoteendpoint_changelist") in index

    listing = a_admin.get(url("agent_changelist")).content.decode()
    assert "agent-a" in listing and "agent-b" not in listing

    response = a_admin.post(url("agent_change", world["agent_a"].pk), agent_form(world["agent_a"]))
    assert response.status_code == 302, response.content.decode()[:3000]
    assert Agent.objects.get(slug="agent-a").max_rounds == 8
    entry = AuditEntry.objects.get(action="agent.update")
    assert entry.team_id == world["a"].pk  # the team's members see it in their audit

    agent_b = world["agent_b"]
    missing = a_admin.get(url("agent_change", agent_b.pk))
    assert missing.status_code == 302 and missing["Location"] == reverse("admin:index")
    posted = a_admin.post(url("agent_change", agent_b.pk), agent_form(agent_b))
    assert posted.status_code == 302 and posted["Location"] == reverse("admin:index")
    assert Agent.objects.get(slug="agent-b").max_rounds == 16
    for view in ("versions", "publish", "permissions", "validate"):
        assert a_admin.get(url(f"agent_{view}", agent_b.pk)).status_code == 404, view
    assert a_admin.post(url("agent_delete", agent_b.pk), {"post": "yes"}).status_code == 302
    assert Agent.objects.filter(slug="agent-b").exists()


def test_b_s_providers_models_and_endpoints_are_hidden_and_shared_ones_read_only(a_admin, world):
    providers = a_admin.get(url("modelprovider_changelist")).content.decode()
    assert "prov-a" in providers and "prov-shared" in providers and "prov-b" not in providers
    models = a_admin.get(url("model_changelist")).content.decode()
    assert (
        "model-a" in models and "model-shared" in models and not re.search(r"\bmodel-b\b", models)
    )  # not the nav's "model-budget"
    endpoints = a_admin.get(url("remoteendpoint_changelist")).content.decode()
    assert "ep-a" in endpoints and "ep-shared" in endpoints and "ep-b" not in endpoints

    for name, row in (
        ("modelprovider", world["provider_b"]),
        ("model", world["model_b"]),
        ("remoteendpoint", world["endpoint_b"]),
    ):
        response = a_admin.get(url(f"{name}_change", row.pk))
        assert response.status_code == 302 and response["Location"] == reverse("admin:index")

    shared = world["provider_shared"]
    page = a_admin.get(url("modelprovider_change", shared.pk))
    assert page.status_code == 200 and 'name="_save"' not in page.content.decode()
    refused = a_admin.post(
        url("modelprovider_change", shared.pk),
        {"slug": "prov-shared", "name": "mine now", "kind": "scripted", "timeout_seconds": 300},
    )
    assert refused.status_code == 403
    assert ModelProvider.objects.get(pk=shared.pk).name == "shared"
    assert a_admin.post(url("remoteendpoint_check_health", world["endpoint_b"].pk)).status_code == (
        404
    )


def test_the_team_field_offers_only_the_admin_s_teams(a_admin, world):
    page = a_admin.get(url("agent_add")).content.decode()
    assert options(page, "team") == [f"*{world['a'].pk}:A"]  # preselected, b not offered
    models = [option.split(":")[1] for option in options(page, "model")]
    assert "model-a" in models and "model-shared" in models and "model-b" not in models
    assert [option.split(":")[1] for option in options(page, "delegates")] == ["agent-a"]

    new = agent_form(world["agent_a"], slug="agent-new", name="new", team=world["b"].pk)
    refused = a_admin.post(url("agent_add"), new)
    assert refused.status_code == 200 and "Select a valid choice" in refused.content.decode()
    assert not Agent.objects.filter(slug="agent-new").exists()

    foreign_model = agent_form(
        world["agent_a"], slug="agent-new", name="new", model=world["model_b"].pk
    )
    assert a_admin.post(url("agent_add"), foreign_model).status_code == 200
    assert not Agent.objects.filter(slug="agent-new").exists()

    made = a_admin.post(url("agent_add"), {**new, "team": world["a"].pk})
    assert made.status_code == 302, made.content.decode()[:3000]
    assert Agent.objects.get(slug="agent-new").team == world["a"]

    provider_page = a_admin.get(url("modelprovider_add")).content.decode()
    assert options(provider_page, "team") == ["*" + f"{world['a'].pk}:A"]
    shared_try = a_admin.post(
        url("modelprovider_add"),
        {"slug": "prov-new", "name": "n", "team": "", "kind": "scripted", "timeout_seconds": 300},
    )
    assert shared_try.status_code == 200 and "This field is required" in shared_try.content.decode()
    assert not ModelProvider.objects.filter(slug="prov-new").exists()


def test_a_site_wide_admin_still_configures_every_team_and_shared_rows(client, world):
    client.force_login(superuser())
    listing = client.get(url("agent_changelist")).content.decode()
    assert "agent-a" in listing and "agent-b" in listing
    shared = world["provider_shared"]
    response = client.post(
        url("modelprovider_change", shared.pk),
        {"slug": "prov-shared", "name": "renamed", "team": "", "kind": "scripted"}
        | {"timeout_seconds": 300, "headers": "{}"},
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    assert ModelProvider.objects.get(pk=shared.pk).name == "renamed"


def test_a_frozen_team_s_configuration_is_refused_with_the_freeze_message(a_admin, world):
    agent = world["agent_a"]
    team_freeze(team=world["a"], actor=ROOT, reason="incident 42")

    page = a_admin.get(url("agent_change", agent.pk)).content.decode()
    assert "is frozen: incident 42" in page and 'name="_save"' not in page
    assert a_admin.post(url("agent_change", agent.pk), agent_form(agent)).status_code == 403
    assert Agent.objects.get(pk=agent.pk).max_rounds == 16

    with pytest.raises(Frozen, match="incident 42"):
        agent_publish(agent=agent, actor=ROOT)

    root = superuser()
    a_admin.force_login(root)  # superusers wait for the freeze to be lifted too
    assert a_admin.post(url("agent_change", agent.pk), agent_form(agent)).status_code == 403
    refused = a_admin.post(url("agent_publish", agent.pk), {"note": "x"}).content.decode()
    assert "Not published: team &quot;a&quot; is frozen: incident 42" in refused
    moved = a_admin.post(url("agent_change", world["agent_b"].pk), agent_form(world["agent_b"]))
    assert moved.status_code == 302  # team b is not frozen
    into_frozen = agent_form(world["agent_b"], team=world["a"].pk)
    response = a_admin.post(url("agent_change", world["agent_b"].pk), into_frozen)
    assert response.status_code == 200 and Agent.objects.get(slug="agent-b").team == world["b"]
    assert not AuditEntry.objects.filter(action="agent.publish").exists()


# --- the agents API ------------------------------------------------------------------------


def test_the_agents_api_shows_only_visible_teams_agents(world):
    api = bearer(token_for(team_member("viewer", "a", username="vic")))
    listing = api.get("/api/v1/agents").json()["items"]
    assert [(a["id"], a["team"]) for a in listing] == [("agent-a", "a")]
    assert api.get("/api/v1/agents/agent-a").json()["team"] == "a"
    assert_error(api.get("/api/v1/agents/agent-b"), 404, "not_found")

    site = bearer(token_for(user_with_role("viewer", "site-viewer")))
    assert {a["id"] for a in site.get("/api/v1/agents").json()["items"]} == {"agent-a", "agent-b"}


def test_the_endpoints_api_shows_shared_and_visible_teams_endpoints(world):
    world["agent_b"].endpoint = world["endpoint_shared"]
    world["agent_b"].save()
    api = bearer(token_for(team_member("viewer", "a", username="vic")))
    items = api.get("/api/v1/endpoints").json()["items"]
    assert [(e["id"], e["team"]) for e in items] == [("ep-a", "a"), ("ep-shared", None)]
    assert items[1]["agents"] == []  # b's agent on the shared endpoint is not shown
    assert_error(api.get("/api/v1/endpoints/ep-b"), 404, "not_found")
    assert_error(api.post("/api/v1/endpoints/ep-a/check"), 403, "permission_denied")


def test_checking_an_endpoint_needs_the_admin_role_in_its_team(world):
    api = bearer(token_for(admin_of("a")))
    assert_error(api.post("/api/v1/endpoints/ep-b/check"), 404, "not_found")
    assert_error(api.post("/api/v1/endpoints/ep-shared/check"), 403, "forbidden")
    checked = api.post("/api/v1/endpoints/ep-a/check")
    assert checked.status_code == 200 and checked.json()["endpoint"]["team"] == "a"
    entry = AuditEntry.objects.get(action="remoteendpoint.check")
    assert entry.team_id == world["a"].pk

    team_freeze(team=world["a"], actor=ROOT, reason="incident 7")
    frozen = assert_error(api.post("/api/v1/endpoints/ep-a/check"), 409, "team_frozen")
    assert "incident 7" in frozen["message"]


# --- create_user --team --------------------------------------------------------------------


def test_create_user_makes_a_team_admin_who_reaches_the_admin(client, world):
    out = io.StringIO()
    call_command("create_user", "tina", "--role", "admin", "--team", "a", stdout=out)
    assert "created admin user 'tina' in team 'a'" in out.getvalue()
    tina = User.objects.get(username="tina")
    assert tina.is_staff and not tina.groups.exists()
    assert Membership.objects.get(user=tina).role == "admin"
    client.force_login(tina)
    listing = client.get(url("agent_changelist")).content.decode()
    assert "agent-a" in listing and "agent-b" not in listing

    call_command("create_user", "tina", "--role", "viewer", "--team", "a", "--update-role")
    assert not User.objects.get(username="tina").is_staff
    with pytest.raises(Exception, match="no team 'nope'"):
        call_command("create_user", "ursula", "--role", "admin", "--team", "nope")


# --- the runs side of the admin ------------------------------------------------------------


def test_runs_schedules_and_audit_in_the_admin_follow_the_agent_s_team(a_admin, world):
    from runs.models import Run, Schedule
    from runs.operations.services.schedules import schedule_plan
    from runs.services.submission_flow import run_start
    from tests.runs.helpers import drive

    runs = {slug: drive(run_start(agent=world[f"agent_{slug}"], messages="hi")) for slug in "ab"}
    # the raw run tables are the superusers' (the runs pages show a team's runs)
    assert a_admin.get(reverse("admin:runs_run_changelist")).status_code == 403
    assert a_admin.get(reverse("admin:runs_run_change", args=[runs["a"].pk])).status_code == 403
    audit = a_admin.get(reverse("admin:common_auditentry_changelist")).content.decode()
    assert f">{runs['a'].pk}<" in audit and f">{runs['b'].pk}<" not in audit

    schedules = {}
    for slug in "ab":
        schedules[slug] = Schedule(
            name=f"nightly-{slug}",
            agent=world[f"agent_{slug}"],
            kind="interval",
            interval_seconds=600,
            timezone="UTC",
            message="go",
        )
        schedule_plan(schedules[slug])
        schedules[slug].save()
    page = a_admin.get(reverse("admin:runs_schedule_changelist")).content.decode()
    assert "nightly-a" in page and "nightly-b" not in page
    add = a_admin.get(reverse("admin:runs_schedule_add")).content.decode()
    assert [option.split(":")[1] for option in options(add, "agent")] == ["---------", "agent-a"]
    run_now = reverse("admin:runs_schedule_run_now", args=[schedules["b"].pk])
    assert a_admin.post(run_now).status_code == 404
    assert not Run.objects.filter(schedule=schedules["b"]).exists()
