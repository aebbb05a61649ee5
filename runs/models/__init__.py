"""The runs app's models: threads, runs and their logs (core), run control (control) and
the dashboard's counters (stats)."""

from runs.fields import RowJSONField, uuid7_default  # migrations name them here
from runs.models.control import BackgroundTask, PendingInput, Schedule
from runs.models.core import (
    DEFAULT_PRIORITY,
    DELEGATE_TICKET_PREFIX,
    PRIORITY_VALIDATORS,
    Decision,
    Message,
    Run,
    RunEvent,
    Thread,
    Ticket,
    TicketQuerySet,
    ToolCall,
)
from runs.models.stats import HourlyStat

__all__ = [
    "DEFAULT_PRIORITY",
    "DELEGATE_TICKET_PREFIX",
    "PRIORITY_VALIDATORS",
    "BackgroundTask",
    "Decision",
    "HourlyStat",
    "Message",
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
