"""The edit form of a ticket: one field per top-level argument of the tool's schema,
pre-filled with the model's arguments, turned back into typed JSON on submit."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from common.errors import InvalidInput
from common.jsonsafe import JsonTooDeep, json_loads
from runs.models import Ticket
from runs.services.tickets import ticket_tool_schema


@dataclass
class EditField:
    name: str
    kind: str  # string, text, number, integer, boolean, json
    value: Any
    required: bool
    description: str = ""

    @property
    def shown(self) -> str:
        if self.kind == "json":
            return (
                json.dumps(self.value, indent=2, ensure_ascii=False)
                if self.value is not None
                else ""
            )
        if self.value is None:
            return ""
        return str(self.value)


def edit_fields(ticket: Ticket) -> list[EditField]:
    schema = ticket_tool_schema(ticket) or {}
    properties: dict[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    arguments = ticket.arguments if isinstance(ticket.arguments, dict) else {}
    names = list(properties) + [name for name in arguments if name not in properties]
    fields = []
    for name in names:
        spec = properties.get(name, {})
        kind = spec.get("type", "json")
        value = arguments.get(name)
        if kind == "string" and (
            spec.get("maxLength", 0) > 200 or (isinstance(value, str) and "\n" in value)
        ):
            kind = "text"
        elif kind not in ("string", "number", "integer", "boolean"):
            kind = "json"
        fields.append(EditField(name, kind, value, name in required, spec.get("description", "")))
    return fields


def edited_arguments(ticket: Ticket, data: Any) -> dict[str, Any]:
    """Typed arguments from the submitted form; blank optional fields are left out."""
    result: dict[str, Any] = {}
    for field in edit_fields(ticket):
        key = f"arg_{field.name}"
        if field.kind == "boolean":
            result[field.name] = data.get(key) in ("on", "true", "1")
            continue
        raw = data.get(key, "")
        if raw == "" and not field.required:
            continue
        try:
            if field.kind == "integer":
                result[field.name] = int(raw)
            elif field.kind == "number":
                result[field.name] = float(raw) if "." in raw or "e" in raw.lower() else int(raw)
            elif field.kind == "json":
                result[field.name] = json_loads(raw)
            else:
                result[field.name] = raw
        except ValueError as exc:
            raise InvalidInput(f"{field.name}: {exc}", {"field": field.name}) from exc
    return result


def parse_answer(raw: str) -> Any:
    """A respond payload: JSON when it parses as JSON, the plain text otherwise."""
    text = raw.strip()
    if not text:
        raise InvalidInput("write an answer")
    try:
        return json_loads(text)
    except JsonTooDeep as exc:
        raise InvalidInput(f"the answer is JSON {exc}") from None
    except ValueError:
        return text
