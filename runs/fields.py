"""Field helpers of the run tables: their primary keys' default and the JSON field the
hot bulk inserts use. `runs.models` re-exports both (its migrations name them there)."""

from __future__ import annotations

import uuid

from django.db import models
from uuid6 import uuid7


def uuid7_default() -> uuid.UUID:
    return uuid.UUID(str(uuid7()))


class RowJSONField(models.JSONField):
    """A JSONField that `bulk_create` writes as one literal per row instead of through
    PostgreSQL's UNNEST arrays: psycopg escapes every JSON text inside an array element
    in Python, a regular-expression substitution per quote, which cost the worker about
    half a millisecond per run for event payloads and messages. The column is the same
    jsonb (so migrations see a plain JSONField)."""

    def get_placeholder(self, value: object, compiler: object, connection: object) -> str:
        return "%s"

    def deconstruct(self) -> tuple:  # type: ignore[type-arg]
        name, _, args, kwargs = super().deconstruct()
        return name, "django.db.models.JSONField", args, kwargs
