"""The models of operations. They keep the `runs` app label (Meta.app_label):
their tables, migrations, permissions and admin URLs are the run core's."""

from runs.operations.models.failures import FailureGroup, FailureGroupRun
from runs.operations.models.notifications import (
    NotificationChannel,
    NotificationCircuit,
    NotificationDelivery,
    NotificationRule,
    NotificationSubscription,
)

__all__ = [
    "FailureGroup",
    "FailureGroupRun",
    "NotificationChannel",
    "NotificationCircuit",
    "NotificationDelivery",
    "NotificationRule",
    "NotificationSubscription",
]
