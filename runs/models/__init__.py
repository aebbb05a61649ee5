"""The run core's models: threads, runs and their logs (core), tickets and decisions
(tickets), run control: background work, pending input, schedules (control), the
operator's preferences (preferences) and the dashboard's counters (stats). The domain
apps' models are theirs: saved views in runs.accounts, notifications and failure groups
in runs.operations, replay sets in runs.replays (runs/<app>/models/)."""

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
from runs.models.preferences import OperatorPreference
from runs.models.stats import HourlyStat, HourlyUsage
from runs.models.tickets import DELEGATE_TICKET_PREFIX, Decision, Ticket, TicketQuerySet

__all__ = [
    "DEFAULT_PRIORITY",
    "DELEGATE_TICKET_PREFIX",
    "PRIORITY_MAX",
    "PRIORITY_MIN",
    "PRIORITY_VALIDATORS",
    "BackgroundTask",
    "Decision",
    "HourlyStat",
    "HourlyUsage",
    "Message",
    "OperatorPreference",
    "PendingInput",
    "RowJSONField",
    "Run",
    "RunEvent",
    "Schedule",
    "Thread",
    "Ticket",
    "TicketQuerySet",
    "ToolCall",
    "uuid7_default",
]
