"""A JSON parser that honours DATA_UPLOAD_MAX_MEMORY_SIZE (DRF reads the raw stream and
would otherwise accept a body of any size), and refuses what would fail later: JSON nested
too deeply for Python, and text PostgreSQL cannot store (common.jsonsafe)."""

from __future__ import annotations

import io
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from common.jsonsafe import TOO_DEEP, JsonTooDeep, check_depth, find_unstorable

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
        try:
            parsed = super().parse(stream, media_type, parser_context)
            check_depth(parsed)
        except (RecursionError, JsonTooDeep):
            # the decoder's RecursionError would reach the exception handler as a 500
            raise ParseError(f"JSON parse error - {TOO_DEEP}") from None
        found = find_unstorable(parsed)
        if found is not None:
            where, what = found
            raise ParseError(f"JSON parse error - {what} are not allowed (at {where})")
        return parsed
