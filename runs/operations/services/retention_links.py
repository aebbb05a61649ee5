"""The tables a retention batch deletes from and the links into them: deleted with the
batch (HANDLED), cleared (nullable links to runs and threads), or unknown, in which case
retention refuses to run rather than leave rows dangling. The deletes and updates are
compiled by the ORM and touch only the rows of the batch."""

from __future__ import annotations

import uuid
from typing import Any, cast

from django.db.models import Model, QuerySet
from django.db.models.deletion import SET_NULL

from runs.models import (
    BackgroundTask,
    Decision,
    Message,
    PendingInput,
    Run,
    RunEvent,
    Thread,
    Ticket,
    ToolCall,
)
from runs.operations.services.retention_results import RetentionUnsafe

# Links into the deleted tables that the batch deletes explicitly (the others, nullable
# links to runs and threads, are cleared). A new cascading link must be added here and
# to `retention._delete_batch` (and the archive), or retention refuses to run
# (`check_relations`).
HANDLED = {
    ("runs.RunEvent", "run"),
    ("runs.ToolCall", "run"),
    ("runs.Ticket", "run"),
    ("runs.Ticket", "tool_call"),
    ("runs.Decision", "ticket"),
    ("runs.Run", "parent_run"),  # whole trees go together
    ("runs.Run", "thread"),  # a thread goes only when it has no runs left
    ("runs.Message", "thread"),
    ("runs.BackgroundTask", "run"),
    ("runs.PendingInput", "thread"),
}
DELETED_MODELS: tuple[type[Model], ...] = (
    Run,
    Thread,
    Message,
    RunEvent,
    ToolCall,
    Ticket,
    Decision,
    BackgroundTask,
    PendingInput,
)


def raw_delete(query: QuerySet[Any]) -> int:
    """One `DELETE … WHERE …` compiled by the ORM: no objects loaded, no signals, no
    cascade (the caller deletes the dependent rows first)."""
    return int(query._raw_delete(query.db) or 0)


def _nullable_links(model: type[Model]) -> list[tuple[type[Model], str]]:
    links: list[tuple[type[Model], str]] = []
    for rel in model._meta.get_fields(include_hidden=True):
        reverse = rel.auto_created and not rel.concrete and (rel.one_to_many or rel.one_to_one)
        if reverse and rel.on_delete is SET_NULL:  # type: ignore[union-attr]
            links.append((cast(type[Model], rel.related_model), rel.field.name))  # type: ignore[union-attr]
    return links


def clear_links(
    model: type[Model],
    ids: list[uuid.UUID],
    *,
    deleting: dict[type[Model], list[uuid.UUID]],
) -> None:
    """`UPDATE … SET link = NULL WHERE link IN (ids)` for every nullable link to `model`
    (audit entries, notes, messages' producer, thread pointers, retries, parent threads),
    leaving out the rows this batch deletes anyway. Each touches only rows of the batch."""
    for related, name in _nullable_links(model):
        query = related._base_manager.filter(**{f"{name}__in": ids})  # type: ignore[attr-defined]
        if related in deleting:
            query = query.exclude(pk__in=deleting[related])
        query.update(**{name: None})


def check_relations() -> None:
    """Refuse to run when a link into the deleted tables is neither handled here nor a
    nullable link to runs or threads: raw deletes would otherwise leave it dangling (and
    fail at commit on a foreign key)."""
    unknown = []
    for model in DELETED_MODELS:
        for rel in model._meta.get_fields(include_hidden=True):
            if not (rel.auto_created and not rel.concrete and (rel.one_to_many or rel.one_to_one)):
                continue
            related = rel.related_model
            key = (related._meta.label, rel.field.name)  # type: ignore[union-attr]
            if key in HANDLED:
                continue
            if rel.on_delete is SET_NULL and model in (Run, Thread):  # type: ignore[union-attr]
                continue
            unknown.append(f"{key[0]}.{key[1]} -> {model._meta.label}")
    if unknown:
        raise RetentionUnsafe(
            "retention does not know how to remove rows linked by " + ", ".join(unknown)
        )
