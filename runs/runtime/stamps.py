"""Ids, timestamps and the JSON trimming every run type shares."""

from __future__ import annotations

import time
from typing import Any

from uuid6 import uuid7


def now_ms() -> int:
    return int(time.time() * 1000)


def new_id() -> str:
    return str(uuid7())


def drop_none(data: dict[str, Any]) -> dict[str, Any]:
    """`data` without its None values (absent fields stay out of the JSON)."""
    return {key: value for key, value in data.items() if value is not None}
