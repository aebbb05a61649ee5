"""Data migrations, run against the current models (their fields are the ones used)."""

from __future__ import annotations

import importlib
from decimal import Decimal

import pytest
from django.apps import apps
from django.contrib.auth.models import User

from common.audit import Actor
from common.models import AuditEntry
from runs.models import Run
from runs.services.runs import run_for_idempotency_key
from runs.services.submission_flow import run_start
from tests.factories import AgentFactory, ModelFactory, scripted_agent

pytestmark = pytest.mark.django_db


def migration(name: str, function: str):
    return getattr(importlib.import_module(f"runs.migrations.{name}"), function)


def test_keys_of_runs_started_before_scoping_get_their_starters_scope():
    scope_existing_keys = migration("0004_idempotency_scope", "scope_existing_keys")
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


def test_runs_from_before_kept_prices_keep_the_prices_they_were_shown_at():
    keep_current_prices = migration("0005_run_prices", "keep_current_prices")
    model = ModelFactory(script=[{"text": "x"}], input_price_per_million_usd=Decimal("2.5"))
    priced = AgentFactory(model=model)  # published after the price is set
    free = scripted_agent([{"text": "x"}])
    runs = [run_start(agent=agent, messages="hi") for agent in (priced, free)]
    Run.objects.update(input_price_per_million_usd=None, output_price_per_million_usd=None)

    keep_current_prices(apps, None)

    prices = dict(Run.objects.values_list("pk", "input_price_per_million_usd"))
    assert prices == {runs[0].pk: Decimal("2.5"), runs[1].pk: None}
