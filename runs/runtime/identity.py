"""Who a run is: its ids, its parent's, and where its activation came from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class RunIdentity:
    thread_id: str
    run_id: str
    agent_id: str
    parent_run_id: str | None = None
    parent_thread_id: str | None = None
    parent_tool_call_id: str | None = None
    dispatch_id: str | None = None
    session_id: str | None = None
    transport_request_id: str | None = None
    origin: str = "user"
    run_mode: str = "foreground"

    def to_json(self) -> dict[str, Any]:
        data = {key: value for key, value in self.__dict__.items() if value is not None}
        if self.run_mode == "foreground":
            data.pop("run_mode")
        return data
