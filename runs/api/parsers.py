"""A JSON parser that honours DATA_UPLOAD_MAX_MEMORY_SIZE (DRF reads the raw stream and
would otherwise accept a body of any size)."""

from __future__ import annotations

import io
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from runs.jsonsafe import find_nul

from .errors import TooLarge


def body_limit() -> int | None:
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE


class LimitedJSONParser(JSONParser):
    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: dict[str, Any] | None = None,
    ) -> Any:
        limit = body_limit()
        if limit is not None:
            request = (parser_context or {}).get("request")
            meta = getattr(request, "META", {}) if request is not None else {}
            try:
                declared = int(meta.get("CONTENT_LENGTH") or 0)
            except (TypeError, ValueError):
                declared = 0
            if declared > limit:
                raise TooLarge(f"The request body is larger than {limit} bytes.")
            data = stream.read(limit + 1)
            if len(data) > limit:
                raise TooLarge(f"The request body is larger than {limit} bytes.")
            stream = io.BytesIO(data)
        parsed = super().parse(stream, media_type, parser_context)
        where = find_nul(parsed)
        if where is not None:
            raise ParseError(
                f"JSON parse error - NUL characters (\\u0000) are not allowed (at {where})"
            )
        return parsed
