"""The domain apps' models moved from the `runs` label to their apps' (runs/migrations/0024
and runs/<app>/migrations/0001): state only, their tables and rows stay; their content
types move, so permissions, group grants and the admin log follow them, both ways."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.models import ADDITION, LogEntry
from django.contrib.auth.models import Group, Permission, User
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from common.roles import ROLE_PERMS, sync_roles
from runs.accounts.models import SavedView
from runs.operations.models import (
    FailureGroup,
    FailureGroupRun,
    NotificationChannel,
    NotificationCircuit,
    NotificationDelivery,
    NotificationRule,
    NotificationSubscription,
)
from runs.replays.models import ReplayItem, ReplaySet
from runs.services.submission_flow import run_start
from tests.factories import publish, scripted_agent, team

BEFORE = [("runs", "0023_run_created_span")]  # the last state with every model under `runs`
MOVED = {
    "replayset": "replays",
    "replayitem": "replays",
    "failuregroup": "operations",
    "failuregrouprun": "operations",
    "notificationchannel": "operations",
    "notificationcircuit": "operations",
    "notificationdelivery": "operations",
    "notificationrule": "operations",
    "notificationsubscription": "operations",
    "savedview": "accounts",
}


def _row_per_moved_table() -> dict[str, Any]:
    agent = scripted_agent([{"text": "x"}])
    run = run_start(agent=agent, messages="hello")
    alice = User.objects.create_user("alice")
    replay_set = ReplaySet.objects.create(agent=agent, version=publish(agent))
    group = FailureGroup.objects.create(
        team=team("red"), fingerprint="f" * 64, error_type="error", title="boom"
    )
    channel = NotificationChannel.objects.create(name="hook", kind="webhook")
    return {
        "replayset": replay_set,
        "replayitem": ReplayItem.objects.create(
            replay_set=replay_set, position=1, original_run=run
        ),
        "failuregroup": group,
        "failuregrouprun": FailureGroupRun.objects.create(
            run_id=run.pk, group=group, created_at=timezone.now()
        ),
        "notificationchannel": channel,
        "notificationcircuit": NotificationCircuit.objects.create(destination="channel:1"),
        "notificationdelivery": NotificationDelivery.objects.create(
            channel=channel, event="run.failed", subject=f"run:{run.pk}", payload={}
        ),
        "notificationrule": NotificationRule.objects.create(channel=channel),
        "notificationsubscription": NotificationSubscription.objects.create(user=alice),
        "savedview": SavedView.objects.create(user=alice, page="runs", name="mine", query="q=x"),
    }


def _migrate(targets: list[tuple[str, str]] | None = None) -> Any:
    """Migrate to `targets` (all the leaves when None); the historical apps there."""
    executor = MigrationExecutor(connection)
    targets = targets or executor.loader.graph.leaf_nodes()
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state(targets).apps


def _group_perms(name: str) -> set[str]:
    perms = Group.objects.get(name=name).permissions.select_related("content_type")
    return {f"{p.content_type.app_label}.{p.codename}" for p in perms}


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_moving_the_models_back_and_forth_keeps_their_rows_grants_and_log():
    rows = _row_per_moved_table()
    alice = User.objects.get(username="alice")
    alice.user_permissions.add(Permission.objects.get(codename="view_failuregroup"))
    channel = rows["notificationchannel"]
    LogEntry.objects.create(
        user=alice,
        content_type=ContentType.objects.get_for_model(NotificationChannel),
        object_id=str(channel.pk),
        object_repr=channel.name,
        action_flag=ADDITION,
    )

    old = _migrate(BEFORE)
    for model, row in rows.items():
        assert old.get_model("runs", model).objects.filter(pk=row.pk).count() == 1, model
        assert not ContentType.objects.filter(app_label=MOVED[model], model=model).exists()
    assert set(
        ContentType.objects.filter(app_label="runs", model__in=MOVED).values_list(
            "model", flat=True
        )
    ) == set(MOVED)
    Group.objects.filter(name__in=ROLE_PERMS).delete()
    sync_roles(old)  # what the role migrations before the move do, on this state
    assert LogEntry.objects.get().content_type.app_label == "runs"

    _migrate()
    for model, row in rows.items():
        assert type(row).objects.filter(pk=row.pk).count() == 1, model
        assert ContentType.objects.get(model=model).app_label == MOVED[model]
    assert SavedView.objects.get().query == "q=x"
    assert ReplayItem.objects.get().original_run_id == rows["replayitem"].original_run_id
    for role, perms in ROLE_PERMS.items():
        assert _group_perms(role) == perms, role
    assert User.objects.get(pk=alice.pk).has_perm("operations.view_failuregroup")
    assert LogEntry.objects.get().get_edited_object() == channel


@pytest.mark.django_db
def test_role_permissions_are_looked_up_under_the_label_a_migration_state_gives_them():
    from common.roles import _historical_label, _model_name

    loader = MigrationExecutor(connection).loader
    before = loader.project_state(BEFORE).apps
    now = loader.project_state(loader.graph.leaf_nodes()).apps
    assert _model_name("replays", "replay_runs") == "replayset"
    assert _model_name("operations", "change_failuregroup") == "failuregroup"
    assert _model_name("runs", "view_schedule") == "schedule"
    assert _model_name("operations", "view_nothing") is None
    for model, label in MOVED.items():
        assert _historical_label(before, label, model) == "runs"
        assert _historical_label(now, label, model) == label
    early = loader.project_state([("runs", "0001_initial")]).apps
    assert _historical_label(early, "replays", "replayset") is None
