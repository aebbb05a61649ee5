"""The models of operations, under the `operations` app label. Their tables keep the names
they had as the run core's (runs_<model>, Meta.db_table)."""

from runs.operations.models.budgets import Budget
from runs.operations.models.failures import FailureGroup, FailureGroupRun
from runs.operations.models.notifications import (
    NotificationChannel,
    NotificationCircuit,
    NotificationDelivery,
    NotificationRule,
    NotificationSubscription,
)
from runs.operations.models.slack import SlackMessage, SlackUserLink

__all__ = [
    "Budget",
    "FailureGroup",
    "FailureGroupRun",
    "NotificationChannel",
    "NotificationCircuit",
    "NotificationDelivery",
    "NotificationRule",
    "NotificationSubscription",
    "SlackMessage",
    "SlackUserLink",
]
