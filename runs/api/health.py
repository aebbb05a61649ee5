"""Readiness: the database, the Celery broker and the channel layer answer."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync
from celery import current_app
from channels.layers import get_channel_layer
from django.db import connection

CHECK_TIMEOUT_SECONDS = 2.0


def check_database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()


def check_broker() -> None:
    with current_app.connection_for_write(connect_timeout=CHECK_TIMEOUT_SECONDS) as conn:
        conn.ensure_connection(max_retries=1, interval_start=0, timeout=CHECK_TIMEOUT_SECONDS)


def check_channel_layer() -> None:
    layer = get_channel_layer()
    if layer is None:
        raise RuntimeError("no channel layer configured")

    async def send() -> None:
        group = f"readyz.{uuid.uuid4().hex}"
        await asyncio.wait_for(
            layer.group_send(group, {"type": "readyz.ping"}), CHECK_TIMEOUT_SECONDS
        )

    async_to_sync(send)()


CHECKS: dict[str, Callable[[], None]] = {
    "database": check_database,
    "broker": check_broker,
    "channel_layer": check_channel_layer,
}


def readiness() -> tuple[bool, dict[str, Any]]:
    """(all ok, per-check results)."""
    results: dict[str, Any] = {}
    for name, check in CHECKS.items():
        started = time.monotonic()
        try:
            check()
        except Exception as exc:
            results[name] = {
                "ok": False,
                "error": f"{exc.__class__.__name__}: {str(exc)[:200]}",
                "ms": round((time.monotonic() - started) * 1000, 1),
            }
        else:
            results[name] = {"ok": True, "ms": round((time.monotonic() - started) * 1000, 1)}
    return all(r["ok"] for r in results.values()), results
