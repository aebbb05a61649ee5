"""Data migrations, run against the current models (their fields are the ones used)."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.contrib.auth.models import User

from runs.models import AuditEntry, Run
from runs.services.audit import Actor
from runs.services.runs import run_for_idempotency_key, run_start
from tests.factories import scripted_agent

pytestmark = pytest.mark.django_db


def test_keys_of_runs_started_before_scoping_get_their_starters_scope():
    scope_existing_keys = importlib.import_module(
        "runs.migrations.0004_idempotency_scope"
    ).scope_existing_keys
    agent = scripted_agent([{"text": "x"}])
    alice = User.objects.create_user("alice")
    by_alice = run_start(agent=agent, messages="a", idempotency_key="k", actor=Actor(user=alice))
    by_system = run_start(agent=agent, messages="s", idempotency_key="k2")
    unkeyed = run_start(agent=agent, messages="u", actor=Actor(user=alice))
    Run.objects.update(idempotency_scope="")  # as the rows were before the migration

    scope_existing_keys(apps, None)

    scopes = dict(Run.objects.values_list("pk", "idempotency_scope"))
    assert scopes == {by_alice.pk: f"user:{alice.pk}", by_system.pk: "", unkeyed.pk: ""}
    assert run_for_idempotency_key(actor=Actor(user=alice), key="k") == by_alice
    assert AuditEntry.objects.filter(action="run.start").count() == 3
