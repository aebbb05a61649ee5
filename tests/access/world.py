"""The shared world of the authorization matrix: two teams, "alpha" and "beta", each with
the same objects, and the users who look at them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.core.management import call_command

from agents.models import ModelProvider, RemoteEndpoint
from agents.models_mcp import McpServer
from agents.selectors import agent_version_latest
from common.access import forget
from common.audit import Actor, audit_record
from common.models import ApiToken, AuditEntry
from common.roles import ROLES
from runs.accounts.models.saved_views import SavedView
from runs.models import PendingInput, Run, Schedule, Thread, Ticket
from runs.operations.models.budgets import Budget
from runs.operations.models.failures import FailureGroup
from runs.operations.models.notifications import (
    NotificationChannel,
    NotificationRule,
    NotificationSubscription,
)
from runs.operations.models.slack import SlackUserLink
from runs.replays.models.replays import ReplaySet
from runs.services.submission_flow import input_submit, run_start
from tests.conftest import clear_process_caches
from tests.factories import (
    APPROVAL,
    note_call,
    role_group,
    scripted_agent,
    superuser,
    team,
    team_member,
    token_for,
    user_with_role,
)
from tests.runs.helpers import drive

TEAMS = ("alpha", "beta")


@dataclass
class Side:
    """One team's objects."""

    slug: str
    team: Any
    agent: Any
    run: Run
    thread: Thread
    ticket: Ticket
    input: PendingInput
    audit: AuditEntry
    replay: ReplaySet
    schedule: Schedule
    provider: ModelProvider
    endpoint: RemoteEndpoint
    operator: Any
    saved_view: SavedView
    subscription: NotificationSubscription
    failure: FailureGroup  # the group of the team's failed run
    rule: NotificationRule
    token_id: int = 0
    token: str = ""
    slack_link: Any = None  # the operator's linked Slack user (SlackUserLink)
    budget: Any = None  # the team's daily budget (never reached: it holds nothing)
    mcp_server: Any = None  # the team's MCP server (on a refused address: never reached)

    def markers(self) -> list[str]:
        """Strings that name this team's objects and nothing else: none of them may show
        in what another team's user gets."""
        return [
            str(self.run.pk),
            str(self.thread.pk),
            str(self.ticket.pk),
            str(self.input.pk),
            str(self.replay.pk),
            str(self.failure.pk),
            self.audit.action,
            self.schedule.name,
        ]


@dataclass
class World:
    sides: dict[str, Side] = field(default_factory=dict)
    alpha_admin: Any = None
    alpha_admin_token: str = ""
    site_admin: Any = None  # the admin role site-wide, is_staff: what alpha_admin is compared to
    root: Any = None
    # alpha's users by role (the admin is alpha_admin), with their API tokens, and the
    # users who try the Django admin in each role (staff: the viewer and operator read it)
    roles: dict[str, Any] = field(default_factory=dict)
    role_tokens: dict[str, str] = field(default_factory=dict)
    staff: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, slug: str) -> Side:
        return self.sides[slug]


def _side(slug: str) -> Side:
    row = team(slug)
    agent = scripted_agent(
        [{"text": "noting", "tool_calls": [note_call(f"{slug} note")]}, {"text": "all done"}],
        permission=APPROVAL,
        team=row,
        slug=f"{slug}-agent",
    )
    run = drive(run_start(agent=agent, messages=f"write it down for {slug}"))
    assert run.status == Run.Status.WAITING, run.status_reason
    # a finished run too, so that the usage figures (cost, tokens, latency) count something
    finisher = scripted_agent([{"text": "all done"}], team=row, slug=f"{slug}-finisher")
    assert drive(run_start(agent=finisher, messages="done?")).status == Run.Status.DONE
    # and a failed one: its team's failure group
    failer = scripted_agent([{"error": f"{slug} upstream 503"}], team=row, slug=f"{slug}-failer")
    assert drive(run_start(agent=failer, messages="fail")).is_failed
    operator = team_member("operator", slug)
    actor = Actor(user=operator, label=operator.username, source="ui")
    audit = audit_record(
        actor=actor, action=f"matrix.{slug}-marker", target_type="run", target_id=run.pk, run=run
    )
    return Side(
        slug=slug,
        team=row,
        agent=agent,
        run=run,
        thread=run.thread,
        ticket=Ticket.objects.get(run=run),
        input=input_submit(agent=agent, messages=f"later {slug}", thread=run.thread).input,
        audit=audit,
        replay=ReplaySet.objects.create(agent=agent, version=agent_version_latest(agent)),
        schedule=Schedule.objects.create(
            name=f"{slug}-nightly-schedule",
            agent=agent,
            message="report",
            kind="interval",
            interval_seconds=3600,
        ),
        provider=ModelProvider.objects.create(
            slug=f"{slug}-provider", name=f"{slug} provider", kind="scripted", team=row
        ),
        endpoint=RemoteEndpoint.objects.create(
            slug=f"{slug}-endpoint",
            name=f"{slug} endpoint",
            base_url="http://127.0.0.1:9/",
            team=row,
        ),
        operator=operator,
        saved_view=SavedView.objects.create(
            user=operator, page="runs", name=f"{slug}-view", query="status=waiting"
        ),
        subscription=NotificationSubscription.objects.create(user=operator, agent=agent),
        failure=FailureGroup.objects.get(team=row),
        rule=NotificationRule.objects.create(
            channel=NotificationChannel.objects.get_or_create(
                name="matrix-mailbox", kind="email", email_to="ops@example.com"
            )[0],
            agent=agent,
        ),
    )


def build_world() -> World:
    world = World(sides={slug: _side(slug) for slug in TEAMS})
    for side in world.sides.values():
        side.token = token_for(side.operator, f"{side.slug}-token")
        side.token_id = ApiToken.objects.get(user=side.operator).pk
        side.slack_link = SlackUserLink.objects.create(
            user=side.operator, slack_team_id="T1", slack_user_id=f"U-{side.slug}", how="page"
        )
        side.budget = Budget.objects.create(team=side.team, token_limit=10**12)
        side.mcp_server = McpServer.objects.create(
            slug=f"{side.slug}-mcp",
            name=f"{side.slug} mcp",
            url="http://127.0.0.1:9/mcp",
            team=side.team,
        )
    world.alpha_admin = team_member("admin", "alpha", username="admin-alpha")
    world.alpha_admin.is_staff = True
    world.alpha_admin.save(update_fields=["is_staff"])
    world.alpha_admin_token = token_for(world.alpha_admin, "alpha-admin-token")
    world.site_admin = user_with_role("admin", "site-admin")
    world.site_admin.is_staff = True
    world.site_admin.save(update_fields=["is_staff"])
    world.root = superuser("root")
    viewer = team_member("viewer", "alpha")
    world.roles = {
        "viewer": viewer,
        "operator": world["alpha"].operator,
        "admin": world.alpha_admin,
    }
    world.role_tokens = {
        "viewer": token_for(viewer, "alpha-viewer-token"),
        "operator": world["alpha"].token,
        "admin": world.alpha_admin_token,
    }
    world.staff = {"admin": world.alpha_admin}
    for role in ("viewer", "operator"):
        world.staff[role] = team_member(role, "alpha", username=f"staff-{role}-alpha")
        world.staff[role].is_staff = True
        world.staff[role].save(update_fields=["is_staff"])
    return world


@pytest.fixture(scope="module")
def shared_world(django_db_setup: None, django_db_blocker: Any) -> Iterator[World]:
    """Both teams' objects, committed once for the module; emptied after it the way a
    transactional test is (a flush), so later tests start from an empty database."""
    clear_process_caches()  # set up before the first test's own clearing
    with django_db_blocker.unblock():
        built = build_world()
    yield built
    with django_db_blocker.unblock():
        call_command("flush", interactive=False, verbosity=0)
        for name in ROLES:  # the role groups the migrations made, as other tests expect
            role_group(name)


@pytest.fixture
def world(shared_world: World, db: None, settings: Any) -> World:
    """The shared world inside the test's transaction: what a test changes is rolled back."""
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"api_token": "100000/min"},
    }
    for user in (
        shared_world.alpha_admin,
        shared_world.site_admin,
        *(s.operator for s in shared_world.sides.values()),
        *shared_world.roles.values(),
        *shared_world.staff.values(),
    ):
        forget(user)
    return shared_world
