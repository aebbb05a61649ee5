"""Published agent versions: publish, draft status, history and diffs, restore, and runs
pinning the version they started with."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from agents.errors import AgentConfigInvalid, AgentNotPublished, NothingToPublish
from agents.models import Agent, AgentVersion, Model, Note
from agents.providers.scripted import ScriptedModelClient
from agents.resolver import AgentNotResolvable, VersionResolver
from agents.services.agents import agent_draft_status, agent_publish, agent_restore
from common.audit import Actor
from common.errors import NotFound
from common.models import AuditEntry
from runs.models import Run, Ticket
from runs.services.submission_flow import run_start
from runs.services.tickets import decision_submit
from tests.factories import (
    APPROVAL,
    AgentFactory,
    ModelFactory,
    call,
    scripted_agent,
    user_with_role,
)
from tests.runs.helpers import drive

pytestmark = pytest.mark.django_db


def actor(user: User | None = None) -> Actor:
    return Actor(user=user, source="admin") if user else Actor(label="test", source="cli")


def url(view: str, *args: Any) -> str:
    return reverse(f"admin:agents_agent_{view}", args=args)


def staff(role: str) -> User:
    user = user_with_role(role, f"{role}-staff")
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    return User.objects.get(pk=user.pk)


# -- the service ---------------------------------------------------------------------------


def test_publish_creates_v1_then_v2_with_author_note_and_an_audit_entry(root_user):
    agent = AgentFactory(slug="writer", published=False)
    assert agent_draft_status(agent).label == "Never published"
    v1 = agent_publish(agent=agent, actor=actor(root_user), note="first cut")
    assert (v1.number, v1.note, v1.published_by, v1.spec["system_prompt"]) == (
        1,
        "first cut",
        root_user,
        "You are a test agent.",
    )
    assert v1.spec["model_id"] == agent.model.slug and v1.spec["endpoint_id"] is None
    assert agent_draft_status(agent).label == "Matches v1"
    agent.system_prompt = "Be terse."
    agent.save()
    assert agent_draft_status(agent).label == "Draft has unpublished changes"
    v2 = agent_publish(agent=agent, actor=actor(root_user), note="terser")
    assert v2.number == 2 and v2.spec["system_prompt"] == "Be terse."
    assert AgentVersion.objects.get(pk=v1.pk).spec["system_prompt"] == "You are a test agent."
    entries = list(AuditEntry.objects.filter(action="agent.publish").order_by("created_at"))
    assert [e.after["version"] for e in entries] == [1, 2]
    assert entries[1].before["system_prompt"] == "You are a test agent."
    assert (entries[1].actor_label, entries[1].comment) == ("root", "terser")


def test_publishing_an_unchanged_draft_is_refused():
    agent = AgentFactory(slug="same")  # v1 published by the factory
    with pytest.raises(NothingToPublish, match=r"nothing to publish.*matches v1"):
        agent_publish(agent=agent, actor=actor())
    assert agent.versions.count() == 1
    assert not AuditEntry.objects.filter(action="agent.publish").exists()


def test_publishing_an_invalid_draft_is_refused_with_every_message():
    agent = AgentFactory(slug="broken", published=False)
    Agent.objects.filter(pk=agent.pk).update(
        tools=["calculator", "no_such_tool"], ticket_deadline_seconds=0
    )
    with pytest.raises(AgentConfigInvalid) as caught:
        agent_publish(agent=Agent.objects.get(pk=agent.pk), actor=actor())
    assert "Unknown tools: no_such_tool" in caught.value.details["tools"]
    assert "at least 1 second" in caught.value.details["ticket_deadline_seconds"]
    assert "cannot be published" in caught.value.message
    assert not agent.versions.exists()


def test_publishing_needs_the_delegates_published_first():
    helper = AgentFactory(slug="helper", published=False)
    boss = AgentFactory(slug="boss", published=False)
    boss.delegates.add(helper)
    with pytest.raises(AgentConfigInvalid) as caught:
        agent_publish(agent=boss, actor=actor())
    assert "publish them first" in caught.value.details["delegates"]
    agent_publish(agent=helper, actor=actor())
    assert agent_publish(agent=boss, actor=actor()).spec["delegates"] == ["helper"]


# -- runs use published versions only --------------------------------------------------------


def test_run_start_without_a_published_version_refuses_clearly():
    agent = scripted_agent([{"text": "hi"}], slug="fresh", published=False)
    with pytest.raises(AgentNotPublished) as caught:
        run_start(agent=agent, messages="hello")
    assert caught.value.message == (
        "agent 'fresh' has no published version; publish it in the admin"
    )
    assert caught.value.status == 409
    assert not Run.objects.exists()


def test_the_api_answers_409_when_the_agent_was_never_published():
    from common.api.tokens import token_create
    from tests.factories import bearer

    AgentFactory(slug="fresh", published=False)
    operator = user_with_role("operator")
    _, raw = token_create(user=operator, name="t", actor=actor())
    response = bearer(raw).post(
        "/api/v1/runs",
        {"agent_id": "fresh", "messages": [{"role": "user", "content": "hi"}]},
        format="json",
    )
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "agent_not_published"
    assert "publish it in the admin" in error["message"]


def test_a_new_run_pins_the_latest_published_version_not_the_draft():
    agent = scripted_agent([{"text": "ok"}])
    agent.system_prompt = "unpublished draft prompt"
    agent.save()
    run = drive(run_start(agent=agent, messages="hi"))
    assert run.agent_version.number == 1
    assert run.agent_version.spec["system_prompt"] == "You are a test agent."


def test_a_run_waiting_on_v1_resumes_on_v1_after_v2_is_published(monkeypatch, root_user):
    """The acceptance case: the resumed segment uses v1's model, prompt and tools."""
    prompts: list[str] = []
    original = ScriptedModelClient.stream

    def recording(self, request, cancel):  # type: ignore[no-untyped-def]
        prompts.append(request.system_prompt)
        return original(self, request, cancel)

    monkeypatch.setattr(ScriptedModelClient, "stream", recording)
    agent = scripted_agent(
        [
            {"text": "noting", "tool_calls": [call("write_note", {"title": "t", "body": "b"})]},
            {"text": "v1 finished"},
        ],
        system_prompt="You are version one.",
        tools=["write_note"],
        permission=APPROVAL,
    )
    run = drive(run_start(agent=agent, messages="take a note"))
    assert run.status == "waiting" and run.agent_version.number == 1

    agent.model = ModelFactory(script=[{"text": "v2 answered"}])
    agent.system_prompt = "You are version two."
    agent.tools = ["calculator"]
    agent.save()
    v2 = agent_publish(agent=agent, actor=actor(root_user), note="new model, no notes")
    assert v2.number == 2

    decision_submit(ticket=Ticket.objects.get(run=run, status="pending"), action="approve")
    run = drive(run)
    assert (run.status_reason, run.final_output) == ("natural", "v1 finished")
    assert run.agent_version.number == 1
    assert Note.objects.filter(run=run).count() == 1  # write_note ran: v1's tool set
    assert prompts == ["You are version one.", "You are version one."]
    # a new run on the same agent gets v2
    fresh = drive(run_start(agent=agent, messages="again"))
    assert (fresh.agent_version.number, fresh.final_output) == (2, "v2 answered")
    assert prompts[-1] == "You are version two."


def test_delegates_resolve_to_their_latest_published_version_never_the_draft():
    helper = scripted_agent([{"text": "x"}], slug="helper", description="published words")
    helper.description = "draft words"
    helper.save()
    resolver = VersionResolver({})
    assert resolver.version("helper").number == 1
    assert resolver._description("helper") == "published words"
    AgentFactory(slug="never", published=False)
    with pytest.raises(AgentNotResolvable, match="'never' has no published version"):
        resolver.version("never")
    with pytest.raises(AgentNotResolvable, match="does not exist"):
        resolver.version("ghost")


def test_seed_demo_publishes_v1_of_each_demo_agent_once():
    call_command("seed_demo", verbosity=0, stdout=_Sink())
    versions = dict(AgentVersion.objects.values_list("agent__slug", "number"))
    assert versions == {
        "assistant": 1,
        "approver": 1,
        "helpdesk": 1,
        "manager": 1,
        "coordinator": 1,
        "toolsmith": 1,  # with the demo MCP server's tools (docs/mcp.md)
    }
    call_command("seed_demo", verbosity=0, stdout=_Sink())
    assert AgentVersion.objects.count() == 6


class _Sink:
    def write(self, text: str) -> None:
        pass

    def flush(self) -> None:
        pass


# -- the admin -----------------------------------------------------------------------------


def test_change_page_shows_the_draft_status_and_the_buttons(root_client, root_user):
    agent = AgentFactory(slug="st", published=False)
    page = root_client.get(url("change", agent.pk)).content.decode()
    assert "Never published" in page
    for label in ("Validate", "Publish", "Versions", "Permission rules"):
        assert f">{label}</a>" in page
    agent_publish(agent=agent, actor=actor(root_user))
    assert "Matches v1" in root_client.get(url("change", agent.pk)).content.decode()
    Agent.objects.filter(pk=agent.pk).update(system_prompt="changed")
    assert (
        "Draft has unpublished changes" in root_client.get(url("change", agent.pk)).content.decode()
    )


def test_publish_view_publishes_with_a_note(root_client, root_user):
    agent = AgentFactory(slug="pub", published=False)
    page = root_client.get(url("publish", agent.pk)).content.decode()
    assert 'name="note"' in page and "v1" in page
    response = root_client.post(url("publish", agent.pk), {"note": "ship it"})
    assert response.status_code == 302 and response["Location"] == url("versions", agent.pk)
    version = agent.versions.get()
    assert (version.number, version.note, version.published_by) == (1, "ship it", root_user)
    again = root_client.post(url("publish", agent.pk), {"note": "again"}).content.decode()
    assert "nothing to publish" in again and agent.versions.count() == 1


def test_publish_view_refuses_an_invalid_draft_with_the_messages(root_client):
    agent = AgentFactory(slug="bad", published=False)
    Agent.objects.filter(pk=agent.pk).update(model=None)
    page = root_client.post(url("publish", agent.pk), {"note": "x"}).content.decode()
    assert "Not published" in page
    assert "Choose a model (a local agent) or a remote endpoint" in page
    assert not agent.versions.exists()


def test_publish_and_restore_need_the_change_permission(client):
    agent = AgentFactory(slug="guarded")
    client.force_login(staff("viewer"))
    assert client.get(url("versions", agent.pk)).status_code == 200
    assert client.get(url("validate", agent.pk)).status_code == 200
    assert client.post(url("publish", agent.pk), {"note": "x"}).status_code == 403
    assert client.post(url("restore", agent.pk, 1)).status_code == 403
    client.force_login(User.objects.create_user("outsider", password="pw", is_staff=True))
    assert client.get(url("versions", agent.pk)).status_code == 403


def test_versions_page_lists_number_author_and_note(root_client, root_user):
    agent = AgentFactory(slug="hist", published=False)
    agent_publish(agent=agent, actor=actor(root_user), note="first <b>note</b>")
    Agent.objects.filter(pk=agent.pk).update(max_rounds=4)
    agent_publish(agent=agent, actor=actor(root_user), note="fewer rounds")
    page = root_client.get(url("versions", agent.pk)).content.decode()
    assert "v2 (latest)" in page and "v1" in page and "fewer rounds" in page
    assert "first &lt;b&gt;note&lt;/b&gt;" in page and "<b>note</b>" not in page
    assert page.count("<td>root</td>") == 2
    assert url("version_diff", agent.pk, 2) in page and url("restore", agent.pk, 1) in page


def test_diff_page_shows_the_changed_fields_escaped(root_client, root_user):
    agent = AgentFactory(slug="diffy", published=False)
    agent_publish(agent=agent, actor=actor(root_user))
    Agent.objects.filter(pk=agent.pk).update(
        system_prompt="Ignore rules <script>alert(1)</script>", tools=["calculator"]
    )
    agent_publish(agent=agent, actor=actor(root_user))
    page = root_client.get(url("version_diff", agent.pk, 2)).content.decode()
    assert "<script>alert(1)</script>" not in page
    assert "+Ignore rules &lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "-You are a test agent." in page
    assert re.search(r"<h3>tools</h3>", page) and "-  &quot;write_note&quot;" in page
    assert "<h3>max_rounds</h3>" not in page  # unchanged fields are left out
    first = root_client.get(url("version_diff", agent.pk, 1)).content.decode()
    assert "nothing (first version)" in first
    against = root_client.get(url("version_diff", agent.pk, 2), {"against": 2}).content.decode()
    assert "No differences." in against
    assert root_client.get(url("version_diff", agent.pk, 9)).status_code == 404


def test_draft_diff_compares_the_draft_with_the_latest_version(root_client):
    agent = AgentFactory(slug="drafty")
    Agent.objects.filter(pk=agent.pk).update(description="<i>new</i> words")
    page = root_client.get(url("draft_diff", agent.pk)).content.decode()
    assert "Changes from <strong>v1</strong> to <strong>the draft</strong>" in page
    assert "+&lt;i&gt;new&lt;/i&gt; words" in page and "<h3>description</h3>" in page


def test_restore_as_draft_needs_a_csrf_post_and_is_audited(root_user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(root_user)
    agent = AgentFactory(slug="back", system_prompt="old prompt", tools=["calculator"])
    original_model, other = agent.model_id, ModelFactory()
    Agent.objects.filter(pk=agent.pk).update(
        system_prompt="new prompt", tools=["current_time"], model=other
    )
    agent_publish(agent=Agent.objects.get(pk=agent.pk), actor=actor(root_user))
    confirm = client.get(url("restore", agent.pk, 1))
    page = confirm.content.decode()
    assert "Yes, restore v1 as the draft" in page and "+old prompt" in page
    assert client.post(url("restore", agent.pk, 1)).status_code == 403  # no CSRF token
    assert Agent.objects.get(pk=agent.pk).system_prompt == "new prompt"
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]
    response = client.post(url("restore", agent.pk, 1), {"csrfmiddlewaretoken": token})
    assert response.status_code == 302
    agent.refresh_from_db()
    assert (agent.system_prompt, agent.tools, agent.model_id) == (
        "old prompt",
        ["calculator"],
        original_model,
    )
    entry = AuditEntry.objects.get(action="agent.restore")
    assert (entry.actor_label, entry.source) == ("root", "admin")
    assert entry.before["system_prompt"] == "new prompt"
    assert entry.after["system_prompt"] == "old prompt"
    assert agent_draft_status(agent).label == "Draft has unpublished changes"
    assert agent.versions.count() == 2  # restoring edits the draft; it does not publish


def test_restore_refuses_clearly_when_the_version_names_something_gone():
    agent = AgentFactory(slug="orphan")
    version = AgentVersion.objects.create(
        agent=agent,
        number=2,
        spec={**agent.versions.get().spec, "model_id": "retired", "delegates": ["ghost"]},
    )
    with pytest.raises(NotFound) as caught:
        agent_restore(version=version, actor=actor())
    assert "model 'retired'" in caught.value.message
    assert "delegate agent 'ghost'" in caught.value.message
    assert Agent.objects.get(pk=agent.pk).model_id == agent.model_id
    assert not AuditEntry.objects.filter(action="agent.restore").exists()


def test_restore_view_reports_a_refusal(root_client):
    agent = AgentFactory(slug="orphan2")
    AgentVersion.objects.create(
        agent=agent, number=2, spec={**agent.versions.get().spec, "model_id": "retired"}
    )
    response = root_client.post(url("restore", agent.pk, 2), follow=True)
    assert "model &#x27;retired&#x27;" in response.content.decode()
    assert Model.objects.filter(pk=agent.model_id).exists()
