"""Operations' database gauges, served with the core's by /metrics (runs.metrics,
setting AWAKEN_METRICS_DATABASE_GAUGES): notifications being retried, destinations
paused by their circuit breaker; budgets' spend and the runs they hold. Computed when scraped (and cached by the collector)."""

from __future__ import annotations

from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric

from runs.models import Run
from runs.operations.models.budgets import Budget
from runs.operations.models.notifications import NotificationCircuit, NotificationDelivery
from runs.operations.services.budgets import BUDGET, Rule, spends


def notification_gauges() -> list[Metric]:
    """Deliveries whose last attempt failed and that will be retried; open circuits."""
    retrying = NotificationDelivery.objects.filter(
        status__in=[NotificationDelivery.Status.PENDING, NotificationDelivery.Status.SENDING],
        attempts__gt=0,
    )
    return [
        GaugeMetricFamily(
            "awaken_notifications_retrying",
            "Notification deliveries whose last attempt failed and that will be retried.",
            value=retrying.count(),
        ),
        GaugeMetricFamily(
            "awaken_notification_circuits_open",
            "Notification destinations paused by their circuit breaker.",
            value=NotificationCircuit.objects.filter(open_until__gt=timezone.now()).count(),
        ),
    ]


def budget_gauges() -> list[Metric]:
    """Each budget's spend in its current period (tokens, USD, the larger share of a limit
    used) and the runs a budget holds (docs/budgets.md): one query without budgets, three
    with."""
    labels = ["team", "agent", "period"]
    tokens = GaugeMetricFamily(
        "awaken_budget_spend_tokens", "Tokens spent in the budget's current period.", labels=labels
    )
    cost = GaugeMetricFamily(
        "awaken_budget_spend_usd", "USD spent in the budget's current period.", labels=labels
    )
    used = GaugeMetricFamily(
        "awaken_budget_used_ratio",
        "The larger share of the budget's limits spent (1: reached).",
        labels=labels,
    )
    budgets = {b.pk: b for b in Budget.objects.select_related("team", "agent")}
    for spend in spends([Rule.of(b) for b in budgets.values()], timezone.now()):
        budget = budgets[spend.rule.id]
        values = [budget.team.slug, budget.agent.slug if budget.agent else "", budget.period]
        tokens.add_metric(values, spend.tokens)
        cost.add_metric(values, float(spend.cost))
        used.add_metric(values, spend.ratio)
    # without budgets no run is held (removing one lets its runs go): no query for it
    waiting = Run.objects.filter(status=Run.Status.WAITING, status_reason=BUDGET)
    held = waiting.count() if budgets else 0
    gauge = GaugeMetricFamily(
        "awaken_runs_waiting_budget", "Runs waiting because a budget is spent.", value=held
    )
    return [tokens, cost, used, gauge]
