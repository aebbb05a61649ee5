"""Websocket routes (the run stream consumer arrives with the operator UI)."""

from __future__ import annotations

from typing import Any

websocket_urlpatterns: list[Any] = []
