"""The runs app's models: threads, runs and their logs (core), tickets and decisions
(tickets), run control (control), saved views (teamwork), notifications, replays and the
dashboard's counters (stats)."""

from runs.fields import RowJSONField, uuid7_default  # migrations name them here
from runs.models.control import BackgroundTask, PendingInput, Schedule
from runs.models.core import (
    DEFAULT_PRIORITY,
    PRIORITY_MAX,
    PRIORITY_MIN,
    PRIORITY_VALIDATORS,
    Message,
    Run,
    RunEvent,
    Thread,
    ToolCall,
)
from runs.models.failures import FailureGroup, FailureGroupRun
from runs.models.notifications import (
    NotificationChannel,
    NotificationCircuit,
    NotificationDelivery,
    NotificationEvent,
    NotificationRule,
    NotificationSubscription,
)
from runs.models.preferences import OperatorPreference
from runs.models.replays import ReplayItem, ReplaySet
from runs.models.stats import HourlyStat, HourlyUsage
from runs.models.teamwork import SavedView
from runs.models.tickets import DELEGATE_TICKET_PREFIX, Decision, Ticket, TicketQuerySet

__all__ = [
    "DEFAULT_PRIORITY",
    "DELEGATE_TICKET_PREFIX",
    "PRIORITY_MAX",
    "PRIORITY_MIN",
    "PRIORITY_VALIDATORS",
    "BackgroundTask",
    "Decision",
    "FailureGroup",
    "FailureGroupRun",
    "HourlyStat",
    "HourlyUsage",
    "Message",
    "NotificationChannel",
    "NotificationCircuit",
    "NotificationDelivery",
    "NotificationEvent",
    "NotificationRule",
    "NotificationSubscription",
    "OperatorPreference",
    "PendingInput",
    "ReplayItem",
    "ReplaySet",
    "RowJSONField",
    "Run",
    "RunEvent",
    "SavedView",
    "Schedule",
    "Thread",
    "Ticket",
    "TicketQuerySet",
    "ToolCall",
    "uuid7_default",
]
