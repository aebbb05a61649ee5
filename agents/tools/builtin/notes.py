"""`write_note`: a real side effect (a Note row), idempotent per run and tool call."""

from __future__ import annotations

import uuid
from typing import Any

from agents.models import Note
from runs.runtime.ports import ToolCallContext
from runs.runtime.types import ToolDescriptor, ToolResult

from .patterns import NOT_BLANK

# Note.tool_call_id's max_length: a longer call id could not be stored (nor deduplicated).
_NOTE_CALL_ID_MAX_LENGTH = 200


class WriteNoteTool:
    """Persist a note: a real side effect, so a replayed call must not write it twice."""

    name = "write_note"

    @property
    def descriptor(self) -> ToolDescriptor:
        return ToolDescriptor(
            name=self.name,
            description="Save a note with a title and a body for the operators to read later.",
            parameters={
                "type": "object",
                "properties": {
                    "title": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 200,
                        "pattern": NOT_BLANK,
                    },
                    "body": {"type": "string", "maxLength": 20_000},
                },
                "required": ["title", "body"],
                "additionalProperties": False,
            },
        )

    def dry_run(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """What a replay (docs/replays.md) answers instead of writing the note."""
        return {
            "dry_run": True,
            "would": "write note",
            "title": str(arguments.get("title", "")).strip(),
            "body": arguments.get("body", ""),
        }

    def execute(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
        title = arguments["title"].strip()
        body = arguments.get("body", "")
        if not title:
            return ToolResult.error(self.name, "The title must not be blank.")
        call_id = ctx.call_id or ""
        if len(call_id) > _NOTE_CALL_ID_MAX_LENGTH:
            return ToolResult.error(self.name, "The tool call id is too long to record.")
        run_id = _existing_run_id(ctx.run_id)
        if run_id is not None and call_id:
            # Keyed on (run, call): a replay after a worker crash returns the first note.
            note, _ = Note.objects.get_or_create(
                run_id=run_id, tool_call_id=call_id, defaults={"title": title, "body": body}
            )
        else:
            # No run row to key on (e.g. outside a persisted run): nothing to dedupe against.
            note = Note.objects.create(run=None, tool_call_id=call_id, title=title, body=body)
        return ToolResult.success(self.name, {"note_id": note.pk, "title": note.title})


def _existing_run_id(value: Any) -> uuid.UUID | None:
    """The run id when a run row has it, else None (not a UUID, or no such row).

    The runs table is reached through `Note.run`'s related model: tools sit below the
    `runs` app and never import it."""
    try:
        run_id = uuid.UUID(str(value))
    except ValueError:
        return None
    runs = Note._meta.get_field("run").related_model
    assert isinstance(runs, type)  # a model class once the app registry is ready
    return run_id if runs._default_manager.filter(pk=run_id).exists() else None
