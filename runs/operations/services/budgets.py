"""Budgets at work (docs/budgets.md): the spend of a team or agent in its current day or
month, the gate that holds a run's next step at the limit (setting AWAKEN_STEP_GATES),
the warning sent once a period, and the sweep step that lets held runs go again.

Spend is read from what runs already write: the token columns of the runs (each
checkpoint updates them) at the prices each run kept, summed over the runs created in the
period. A run counts in the period it was created in. One query answers every budget
that applies to a run (FILTER clauses), and none is made for a run no budget applies to:
the budgets themselves are cached (Django's cache, AWAKEN_BUDGET_CACHE_SECONDS, forgotten
at every change)."""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
import zoneinfo
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.db.models import DecimalField, F, Q, Sum, Value
from django.db.models.functions import Coalesce
from django.db.models.signals import post_delete, post_save
from django.urls import reverse
from django.utils import timezone

from agents.pricing import MILLION
from runs.models import Run
from runs.operations.models.budgets import Budget
from runs.operations.models.notifications import NotificationEvent
from runs.operations.services import notifications as n
from runs.runtime.status import WaitingReason
from runs.services.dispatch import run_dispatch

logger = logging.getLogger(__name__)

BUDGET = WaitingReason.BUDGET.value  # the status reason of a run held by a budget
SWEEP_BATCH = 500
clock: Callable[[], dt.datetime] = timezone.now  # tests move it


@dataclass(frozen=True)
class Rule:
    """A budget as the gate reads it (cached)."""

    id: int
    team_id: int
    agent_id: int | None
    period: str
    time_zone: str
    cost_limit: Decimal | None
    token_limit: int | None
    warn_percent: int
    warned_period: str

    @classmethod
    def of(cls, budget: Budget) -> Rule:
        return cls(
            budget.pk,
            budget.team_id,
            budget.agent_id,
            budget.period,
            budget.time_zone,
            budget.cost_limit_usd,
            budget.token_limit,
            budget.warn_percent,
            budget.warned_period,
        )

    def applies(self, team_id: int | None, agent_id: int | None) -> bool:
        if self.agent_id is not None:
            return self.agent_id == agent_id
        return self.team_id == team_id


@dataclass(frozen=True)
class Spend:
    """A budget in its current period: what was spent against what it allows."""

    rule: Rule
    start: dt.datetime
    end: dt.datetime
    key: str  # "day:2026-11-28", "month:2026-11"
    tokens: int
    cost: Decimal

    @property
    def ratio(self) -> float:
        """The larger share of a limit spent (0 without limits; a limit of 0 is full)."""
        shares = [0.0]
        for spent, limit in (
            (self.tokens, self.rule.token_limit),
            (self.cost, self.rule.cost_limit),
        ):
            if limit is not None:
                shares.append(float(spent) / float(limit) if limit > 0 else 1.0)
        return max(shares)

    @property
    def reached(self) -> bool:
        rule = self.rule
        return (rule.token_limit is not None and self.tokens >= rule.token_limit) or (
            rule.cost_limit is not None and self.cost >= rule.cost_limit
        )

    @property
    def warned(self) -> bool:
        return self.ratio * 100 >= self.rule.warn_percent


# --- the cached budgets ---------------------------------------------------------------------


class _Cached:
    """Every budget, as rules: in the `shared` cache (Redis when there is one, so every
    process sees a change at once) until a change forgets them, and in each process for
    AWAKEN_BUDGET_CACHE_SECONDS at most before it asks the shared cache again. A run to
    which no budget applies thus costs no query, and a Redis read once a second at most."""

    KEY = "budgets:rules"
    SHARED_TTL = 3600.0

    def __init__(self) -> None:
        self._local: tuple[float, list[Rule]] | None = None

    def rules(self) -> list[Rule]:
        local = self._local
        ttl = float(settings.AWAKEN_BUDGET_CACHE_SECONDS)
        if local is not None and time.monotonic() - local[0] < ttl:
            return local[1]
        shared = caches["shared"]
        found = shared.get(self.KEY)
        if found is None:
            found = [Rule.of(budget) for budget in Budget.objects.order_by("pk")]
            shared.set(self.KEY, found, self.SHARED_TTL)
        self._local = (time.monotonic(), found)
        return list(found)

    def forget(self) -> None:
        self.reset()
        transaction.on_commit(self.reset)  # again: a read that raced the change

    def reset(self) -> None:
        self._local = None
        caches["shared"].delete(self.KEY)


cached = _Cached()


def _budgets_changed(sender: Any, **kwargs: Any) -> None:
    cached.forget()


post_save.connect(_budgets_changed, sender=Budget, dispatch_uid="budgets-changed")
post_delete.connect(_budgets_changed, sender=Budget, dispatch_uid="budgets-deleted")


def rules_for(team_id: int | None, agent_id: int | None) -> list[Rule]:
    """The budgets that hold a run of this agent (of this team): no query when cached."""
    return [rule for rule in cached.rules() if rule.applies(team_id, agent_id)]


# --- spend ------------------------------------------------------------------------------------


def period_bounds(period: str, time_zone: str, now: dt.datetime) -> tuple[dt.datetime, ...]:
    """The current day or month in `time_zone`: its start and end, in UTC."""
    zone = zoneinfo.ZoneInfo(time_zone)
    local = now.astimezone(zone)
    if period == Budget.Period.MONTH:
        first = local.date().replace(day=1)
        after = (first + dt.timedelta(days=32)).replace(day=1)
    else:
        first = local.date()
        after = first + dt.timedelta(days=1)
    start = dt.datetime.combine(first, dt.time(), zone)
    end = dt.datetime.combine(after, dt.time(), zone)
    return start.astimezone(dt.UTC), end.astimezone(dt.UTC)


def period_key(period: str, start: dt.datetime, time_zone: str) -> str:
    local = start.astimezone(zoneinfo.ZoneInfo(time_zone))
    return f"{period}:{local:%Y-%m}" if period == Budget.Period.MONTH else f"{period}:{local:%F}"


COST = DecimalField(max_digits=40, decimal_places=12)
ZERO = Value(Decimal(0), output_field=COST)


def _cost_sum(scope: Q) -> Sum:
    """The sum of tokens times price per million (divided by a million afterwards), at
    the prices each run kept; an unpriced side is free."""
    return Sum(
        F("input_tokens") * Coalesce(F("input_price_per_million_usd"), ZERO)
        + F("output_tokens") * Coalesce(F("output_price_per_million_usd"), ZERO),
        filter=scope,
        output_field=COST,
    )


def spends(rules: Iterable[Rule], now: dt.datetime) -> list[Spend]:
    """Each budget's spend in its current period, all in one query (none without rules)."""
    rules = list(rules)
    if not rules:
        return []
    bounds = {rule.id: period_bounds(rule.period, rule.time_zone, now) for rule in rules}
    sums: dict[str, Any] = {}
    for rule in rules:
        start, end = bounds[rule.id]
        whose = Q(agent_id=rule.agent_id) if rule.agent_id else Q(agent__team_id=rule.team_id)
        scope = whose & Q(created_at__gte=start, created_at__lt=end)
        sums[f"t{rule.id}"] = Sum(F("input_tokens") + F("output_tokens"), filter=scope)
        sums[f"c{rule.id}"] = _cost_sum(scope)
    earliest = min(start for start, _ in bounds.values())
    teams = {rule.team_id for rule in rules}
    row = Run.objects.filter(agent__team_id__in=teams, created_at__gte=earliest).aggregate(**sums)
    found = []
    for rule in rules:
        start, end = bounds[rule.id]
        cost = Decimal(row[f"c{rule.id}"] or 0) / MILLION
        key = period_key(rule.period, start, rule.time_zone)
        found.append(Spend(rule, start, end, key, int(row[f"t{rule.id}"] or 0), cost))
    return found


# --- the gate -----------------------------------------------------------------------------------


def budget_gate(run: Any) -> Callable[[], str | None] | None:
    """The step gate of setting AWAKEN_STEP_GATES: None when no budget applies to the
    run's agent (no query then), else a check asked before each step."""
    agent = run.agent
    team_id, agent_id = agent.team_id, agent.pk
    if not rules_for(team_id, agent_id):
        return None
    return lambda: budget_hold(team_id, agent_id)


def budget_hold(
    team_id: int | None, agent_id: int | None, now: dt.datetime | None = None
) -> str | None:
    """`budget` when a budget of the team or agent is spent (the step waits), else None;
    a budget crossing its warning level notifies, once a period. One query (more only
    the moment a warning is sent)."""
    found = spends(rules_for(team_id, agent_id), now or clock())
    for spend in found:
        if spend.warned and spend.rule.warned_period != spend.key:
            budget_warn(spend)
    return BUDGET if any(spend.reached for spend in found) else None


@transaction.atomic
def budget_warn(spend: Spend) -> bool:
    """Notify budget.warning about a budget, once for its period (a guarded update: two
    workers crossing it at once send one)."""
    marked = (
        Budget.objects.filter(pk=spend.rule.id)
        .exclude(warned_period=spend.key)
        .update(warned_period=spend.key)
    )
    if marked:
        cached.forget()
        notify_budget(spend, NotificationEvent.BUDGET_WARNING)
    return bool(marked)


def spend_json(spend: Spend) -> dict[str, Any]:
    rule = spend.rule
    return {
        "id": rule.id,
        "period": rule.period,
        "period_start": spend.start,
        "period_end": spend.end,
        "time_zone": rule.time_zone,
        "tokens": spend.tokens,
        "token_limit": rule.token_limit,
        "cost_usd": spend.cost.quantize(Decimal("0.000001")),
        "cost_limit_usd": rule.cost_limit,
        "warn_percent": rule.warn_percent,
        "used_percent": round(spend.ratio * 100, 1),
        "reached": spend.reached,
    }


def notify_budget(spend: Spend, event: str) -> int:
    """Queue `event` about a budget for every destination its routes match (the agent's
    routes for an agent's budget, rules for any agent for a team's)."""
    targets = n.destinations(event, spend.rule.agent_id, None)
    if not targets:
        return 0
    budget = Budget.objects.select_related("team", "agent").get(pk=spend.rule.id)
    body = {
        "budget": {
            **json.loads(json.dumps(spend_json(spend), cls=DjangoJSONEncoder)),
            "team": budget.team.slug,
            "agent": budget.agent.slug if budget.agent else None,
        },
        "url": n.site_url(reverse("runs:dashboard")),
    }
    subject = f"budget:{spend.rule.id}:{spend.key}"
    return n._insert(n._queue(event, subject, body, targets, timezone.now()))


# --- letting held runs go ------------------------------------------------------------------------


def budgets_release(now: dt.datetime, *, team_id: int | None = None) -> int:
    """Runs held by a budget that no longer holds them (a new period, a raised or removed
    limit) are due again, their doorbell rung on commit. `team_id`: that team's only."""
    if team_id is None and not cached.rules():
        return 0  # no budget: none holds a run (removing one let its runs go)
    held = Run.objects.filter(status=Run.Status.WAITING, status_reason=BUDGET, due=False)
    if team_id is not None:
        held = held.filter(agent__team_id=team_id)
    pairs = held.values_list("pk", "agent_id", "agent__team_id")[:SWEEP_BATCH]
    verdicts: dict[tuple[int, int], str | None] = {}
    free = []
    for run_id, agent_id, team in pairs:
        if (team, agent_id) not in verdicts:
            verdicts[(team, agent_id)] = budget_hold(team, agent_id, now)
        if verdicts[(team, agent_id)] is None:
            free.append(run_id)
    if not free:
        return 0
    with transaction.atomic():  # guarded: only runs still held, locked while woken
        woken = Run.objects.select_for_update(skip_locked=True).filter(
            pk__in=free, status=Run.Status.WAITING, status_reason=BUDGET, due=False
        )
        ids = list(woken.values_list("pk", flat=True))
        Run.objects.filter(pk__in=ids).update(due=True)
        for run_id in ids:
            run_dispatch(run_id)
    return len(ids)


def budgets_sweep(now: dt.datetime) -> dict[str, int]:
    """A sweep step (AWAKEN_SWEEP_STEPS): held runs whose budget lets them go again."""
    return {"budget_released": budgets_release(now)}
