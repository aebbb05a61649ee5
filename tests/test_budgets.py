"""Budgets (docs/budgets.md): limits per team and agent per day and month, the step gate
that holds runs at the limit without calling the model, the warning sent once, runs let
go on a new period and on a raised limit, the query cost of the gate, the API's team
isolation."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from agents.providers.scripted import ScriptedModelClient
from common.audit import Actor
from common.models import AuditEntry
from runs.models import Run
from runs.operations.models.budgets import Budget
from runs.operations.models.notifications import (
    NotificationChannel,
    NotificationDelivery,
    NotificationRule,
)
from runs.operations.services import budgets as b
from runs.operations.services.budget_changes import budget_create, budget_update
from runs.services import dispatch
from runs.services.execution import run_advance
from runs.services.submission_flow import run_start
from tests.factories import AgentFactory, ModelFactory, call, team, team_member
from tests.runs.helpers import assert_gap_free, drive

pytestmark = pytest.mark.django_db

ADMIN = Actor(label="budget-admin", source="admin")
NOW = dt.datetime(2026, 3, 14, 12, 0, tzinfo=dt.UTC)
# two steps: the calculator, then an answer (each step: a few tokens)
SCRIPT: list[dict[str, Any]] = [
    {"text": "", "tool_calls": [call("calculator", {"expression": "6*7"})]},
    {"text": "it is 42"},
]


@pytest.fixture(autouse=True)
def _frozen_clock(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The budgets' clock at NOW (runs are created at NOW too); `move(to)` moves it."""
    clock = {"now": NOW}
    monkeypatch.setattr(b, "clock", lambda: clock["now"])
    monkeypatch.setattr(dispatch, "_enqueue", lambda *a, **k: None)

    def move(to: dt.datetime) -> None:
        clock["now"] = to

    return move


@pytest.fixture
def model_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every call of a scripted model, by model id."""
    calls: list[str] = []
    original = ScriptedModelClient.stream

    def counted(self: ScriptedModelClient, request: Any, cancel: Any) -> Any:
        calls.append(self.model_id)
        return original(self, request, cancel)

    monkeypatch.setattr(ScriptedModelClient, "stream", counted)
    return calls


def priced_agent(**kwargs: Any) -> Any:
    model = ModelFactory(
        script=SCRIPT,
        input_price_per_million_usd=Decimal("1000000"),  # $1 per token: easy sums
        output_price_per_million_usd=Decimal("1000000"),
    )
    return AgentFactory(model=model, tools=["calculator"], **kwargs)


def start(agent: Any) -> Run:
    run = run_start(agent=agent, messages="what is 6*7?")
    Run.objects.filter(pk=run.pk).update(created_at=b.clock())
    return run


def test_a_run_at_the_limit_waits_with_reason_budget_and_calls_no_model(
    model_calls: list[str],
) -> None:
    agent = priced_agent()
    budget_create(actor=ADMIN, team=agent.team, agent=agent, period="day", token_limit=0)
    run = drive(start(agent))
    assert (run.status, run.status_reason, run.due) == ("waiting", "budget", False)
    assert run.waiting["reason"] == "budget"
    assert model_calls == []
    assert run.lease_owner == "" and run.steps == 0
    assert_gap_free(run)


def test_a_team_budget_lets_runs_go_until_the_limit_then_holds_the_next_step(
    model_calls: list[str],
) -> None:
    agent = priced_agent()
    first = drive(start(agent))
    assert first.status == "done"
    spent = first.input_tokens + first.output_tokens
    assert len(model_calls) == 2
    # the team may spend what the first run spent and a little more: the second run's
    # first step goes (under the limit when asked), its next one waits
    budget_create(actor=ADMIN, team=agent.team, period="day", token_limit=spent + 1)
    second = drive(start(agent))
    assert (second.status, second.status_reason) == ("waiting", "budget")
    assert second.steps == 1 and len(model_calls) == 3
    third = drive(start(agent))
    assert (third.status, third.status_reason, third.steps) == ("waiting", "budget", 0)
    assert len(model_calls) == 3
    assert_gap_free(second)
    assert_gap_free(third)


def test_an_agent_budget_holds_that_agent_only(model_calls: list[str]) -> None:
    held, free = priced_agent(), priced_agent()
    budget_create(actor=ADMIN, team=held.team, agent=held, period="month", cost_limit_usd=0)
    assert drive(start(held)).status_reason == "budget"
    assert drive(start(free)).status == "done"
    assert model_calls == [free.model.slug, free.model.slug]


def test_cost_limits_count_at_the_prices_runs_kept() -> None:
    agent = priced_agent()
    run = drive(start(agent))
    budget = budget_create(
        actor=ADMIN, team=agent.team, period="day", cost_limit_usd=Decimal("1000")
    )
    (spend,) = b.spends([b.Rule.of(budget)], NOW)
    assert spend.tokens == run.input_tokens + run.output_tokens
    assert spend.cost == Decimal(spend.tokens)  # $1 per token
    assert not spend.reached


def test_a_new_day_lets_held_runs_go(_frozen_clock: Any, model_calls: list[str]) -> None:
    agent = priced_agent()
    drive(start(agent))
    budget_create(actor=ADMIN, team=agent.team, period="day", token_limit=1)
    held = drive(start(agent))
    assert held.status_reason == "budget"
    assert b.budgets_sweep(NOW) == {"budget_released": 0}  # still today
    tomorrow = NOW + dt.timedelta(days=1)
    _frozen_clock(tomorrow)
    assert b.budgets_sweep(tomorrow) == {"budget_released": 1}
    held = drive(held)
    assert (held.status, held.status_reason) == ("done", "natural")
    assert_gap_free(held)


def test_the_team_time_zone_decides_when_the_day_starts() -> None:
    # 23:30 UTC on the 14th is already the 15th in Tokyo, still the 14th in New York
    late = dt.datetime(2026, 3, 14, 23, 30, tzinfo=dt.UTC)
    tokyo = b.period_bounds("day", "Asia/Tokyo", late)
    assert tokyo[0] == dt.datetime(2026, 3, 14, 15, 0, tzinfo=dt.UTC)
    york = b.period_bounds("day", "America/New_York", late)
    assert york[0] == dt.datetime(2026, 3, 14, 4, 0, tzinfo=dt.UTC)
    month = b.period_bounds("month", "UTC", late)
    assert month == (
        dt.datetime(2026, 3, 1, tzinfo=dt.UTC),
        dt.datetime(2026, 4, 1, tzinfo=dt.UTC),
    )


def test_a_raised_limit_lets_held_runs_go_and_is_audited(model_calls: list[str]) -> None:
    agent = priced_agent()
    budget = budget_create(actor=ADMIN, team=agent.team, period="day", token_limit=0)
    held = drive(start(agent))
    assert held.status_reason == "budget"
    budget_update(actor=ADMIN, budget=budget, token_limit=10_000)
    held.refresh_from_db()
    assert held.due
    held = drive(held)
    assert held.status == "done" and len(model_calls) == 2
    entry = AuditEntry.objects.get(action="budget.update")
    assert (entry.before["token_limit"], entry.after["token_limit"]) == (0, 10_000)
    assert entry.team_id == agent.team_id and entry.actor_label == "budget-admin"


def test_crossing_the_warning_level_notifies_once_a_period(_frozen_clock: Any) -> None:
    agent = priced_agent()
    channel = NotificationChannel.objects.create(name="ops", kind="email", email_to="a@b.c")
    NotificationRule.objects.create(channel=channel, events=["budget.warning"])
    first = drive(start(agent))
    spent = first.input_tokens + first.output_tokens
    budget_create(
        actor=ADMIN, team=agent.team, period="day", token_limit=spent * 10, warn_percent=10
    )
    for _ in range(3):
        drive(start(agent))
    warnings = NotificationDelivery.objects.filter(event="budget.warning")
    assert warnings.count() == 1
    payload = warnings.get().payload["budget"]
    assert payload["team"] == agent.team.slug and payload["period"] == "day"
    assert Budget.objects.get().warned_period == "day:2026-03-14"
    _frozen_clock(NOW + dt.timedelta(days=1))  # a new day: a new warning when crossed again
    for _ in range(2):
        run = start(agent)
        drive(run)
    assert warnings.count() == 2


def test_no_budget_costs_the_gate_no_query(django_assert_num_queries: Any) -> None:
    agent = priced_agent()
    other = priced_agent()
    budget_create(actor=ADMIN, team=other.team, agent=other, period="day", token_limit=5)
    run = start(agent)
    b.cached.rules()  # the process has read the budgets once (cached)
    claimed = Run.objects.select_related("agent").get(pk=run.pk)
    with django_assert_num_queries(0):
        assert b.budget_gate(claimed) is None


def test_a_budget_costs_the_gate_one_query_per_step(django_assert_num_queries: Any) -> None:
    agent = priced_agent()
    budget_create(actor=ADMIN, team=agent.team, period="day", token_limit=10_000)
    budget_create(actor=ADMIN, team=agent.team, agent=agent, period="month", cost_limit_usd=9)
    run = start(agent)
    b.cached.rules()
    claimed = Run.objects.select_related("agent").get(pk=run.pk)
    with django_assert_num_queries(0):
        gate = b.budget_gate(claimed)
    assert gate is not None
    with django_assert_num_queries(1):  # both budgets, day and month: one query
        assert gate() is None


def test_the_whole_run_costs_the_same_statements_without_budgets(
    django_assert_num_queries: Any,
) -> None:
    """With no budget anywhere, the claim and every step are what they were: a run's
    statements do not change when the budgets were read once (cached)."""
    agent = priced_agent()
    warm = start(agent)
    run_advance(run_id=warm.pk, worker="w")  # warms the process caches, budgets included
    run = start(agent)
    with CaptureQueriesContext(connection) as without:
        run_advance(run_id=run.pk, worker="w")
    assert not any("operations_budget" in q["sql"] for q in without.captured_queries)


# --- the API: team-scoped, role-checked, audited ---------------------------------------------


def _api(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_the_api_sets_and_shows_budgets_of_its_own_team_only() -> None:
    mine, theirs = team("blue"), team("red")
    agent = priced_agent(team=mine)
    admin = team_member("admin", "blue", "blue-admin")
    viewer = team_member("viewer", "blue", "blue-viewer")
    stranger = team_member("admin", "red", "red-admin")
    created = _api(admin).post(
        "/api/v1/budgets",
        {"team": "blue", "period": "day", "token_limit": 100, "warn_percent": 50},
        format="json",
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["team"], body["agent"], body["tokens"], body["reached"]) == (
        "blue",
        None,
        0,
        False,
    )
    budget_id = body["id"]
    assert AuditEntry.objects.filter(action="budget.create", team=mine).exists()
    listed = _api(viewer).get("/api/v1/budgets").json()["items"]
    assert [x["id"] for x in listed] == [budget_id]
    assert _api(stranger).get("/api/v1/budgets").json()["items"] == []
    assert _api(stranger).get(f"/api/v1/budgets/{budget_id}").status_code == 404
    refused = _api(stranger).patch(
        f"/api/v1/budgets/{budget_id}", {"token_limit": 1}, format="json"
    )
    assert refused.status_code == 404
    assert (
        _api(viewer)
        .patch(f"/api/v1/budgets/{budget_id}", {"token_limit": 1}, format="json")
        .status_code
        == 403
    )
    # another team's agent, or a budget for a team the caller is not in
    foreign = _api(stranger).post(
        "/api/v1/budgets", {"team": "blue", "token_limit": 1}, format="json"
    )
    assert foreign.status_code in (403, 404)
    assert Budget.objects.filter(team=theirs).count() == 0
    by_agent = _api(viewer).get(f"/api/v1/budgets?agent={agent.slug}").json()["items"]
    assert [x["id"] for x in by_agent] == [budget_id]


def test_the_api_refuses_bad_budgets_clearly() -> None:
    team("blue")
    admin = team_member("admin", "blue", "blue-admin")
    client = _api(admin)
    none = client.post("/api/v1/budgets", {"team": "blue"}, format="json")
    assert none.status_code == 400 and "limit" in none.json()["error"]["message"]
    zone = client.post(
        "/api/v1/budgets",
        {"team": "blue", "token_limit": 5, "time_zone": "Mars/Base"},
        format="json",
    )
    assert zone.status_code == 400
    ok = client.post("/api/v1/budgets", {"team": "blue", "token_limit": 5}, format="json")
    assert ok.status_code == 201
    again = client.post("/api/v1/budgets", {"team": "blue", "token_limit": 6}, format="json")
    assert again.status_code == 409


# --- where it shows ------------------------------------------------------------------------


def test_the_run_page_and_the_dashboard_show_spend_against_the_limits(root_client: Any) -> None:
    agent = priced_agent()
    budget_create(actor=ADMIN, team=agent.team, period="day", token_limit=0)
    held = drive(start(agent))
    page = root_client.get(f"/runs/{held.pk}/").content.decode()
    assert "Waiting: budget reached" in page
    assert 'id="budgets"' in page and "Limit reached — runs wait" in page
    dashboard = root_client.get("/").content.decode()
    assert f"team {agent.team.slug}" in dashboard and "Limit reached" in dashboard
    free = priced_agent(team=team("elsewhere"))
    page = root_client.get(f"/runs/{drive(start(free)).pk}/").content.decode()
    assert 'id="budgets"' not in page  # no budget holds it: no card


def test_the_metrics_carry_spend_and_held_runs() -> None:
    from runs.operations.metrics import budget_gauges

    agent = priced_agent()
    budget_create(actor=ADMIN, team=agent.team, period="day", token_limit=0)
    drive(start(agent))
    families = {f.name: f for f in budget_gauges()}
    (used,) = families["awaken_budget_used_ratio"].samples
    assert used.labels == {"team": agent.team.slug, "agent": "", "period": "day"}
    assert used.value == 1.0
    assert families["awaken_runs_waiting_budget"].samples[0].value == 1


def test_the_admin_change_is_audited_and_lets_held_runs_go(root_client: Any) -> None:
    agent = priced_agent()
    budget = budget_create(actor=ADMIN, team=agent.team, period="day", token_limit=0)
    held = drive(start(agent))
    response = root_client.post(
        f"/admin/operations/budget/{budget.pk}/change/",
        {
            "team": agent.team_id,
            "agent": "",
            "period": "day",
            "time_zone": "UTC",
            "cost_limit_usd": "",
            "token_limit": "100000",
            "warn_percent": "80",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    held.refresh_from_db()
    assert held.due
    entry = AuditEntry.objects.get(action="budget.update", source="admin")
    assert entry.after["token_limit"] == 100000


def test_the_step_gates_are_asked_in_their_declared_order(settings: Any) -> None:
    from runs.services.step_gates import run_step_gate

    settings.AWAKEN_STEP_GATES = [f"{__name__}.gate_never", f"{__name__}.gate_pause"]
    gate = run_step_gate(object())
    assert gate is not None and gate() == "manual_pause"
    settings.AWAKEN_STEP_GATES = [f"{__name__}.gate_never"]
    assert run_step_gate(object()) is None


def gate_never(run: Any) -> None:
    return None


def gate_pause(run: Any) -> Any:
    return lambda: "manual_pause"


def test_the_held_run_s_timeline_says_why_it_waits(root_client: Any) -> None:
    agent = priced_agent()
    budget_create(actor=ADMIN, team=agent.team, period="day", token_limit=0)
    held = drive(start(agent))
    page = root_client.get(f"/runs/{held.pk}/").content.decode()
    assert "Run finished</strong>" in page or "Run finished" in page
    assert "Waiting for a decision" not in page
