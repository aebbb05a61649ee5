"""Stop policies, evaluated after every inference.

A limit of 0 disables a policy. The statistics live in the run's persisted state so a
resumed run keeps counting (its steps do not reset either).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

DEFAULT_MAX_ROUNDS = 16
STATS_KEY = "__runtime.stop_condition_stats"
KNOWN_TYPES = ("max_rounds", "timeout", "token_budget", "consecutive_errors")


class StopConfigError(ValueError):
    pass


@dataclass
class StopStats:
    inferences: int = 0
    consecutive_errors: int = 0
    started_at: float = field(default_factory=time.time)

    def to_json(self) -> dict[str, Any]:
        return {
            "inferences": self.inferences,
            "consecutive_errors": self.consecutive_errors,
            "started_at": self.started_at,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> StopStats:
        if not data:
            return cls()
        return cls(
            inferences=int(data.get("inferences") or 0),
            consecutive_errors=int(data.get("consecutive_errors") or 0),
            started_at=float(data.get("started_at") or time.time()),
        )


@dataclass(frozen=True)
class StopPolicies:
    max_rounds: int = DEFAULT_MAX_ROUNDS
    timeout_seconds: float = 0
    token_budget: int = 0
    consecutive_errors: int = 0

    @classmethod
    def from_spec(
        cls, max_rounds: int | None, conditions: list[dict[str, Any]] | None
    ) -> StopPolicies:
        values: dict[str, Any] = {
            "max_rounds": DEFAULT_MAX_ROUNDS if max_rounds is None else int(max_rounds)
        }
        for condition in conditions or []:
            if not isinstance(condition, dict) or "type" not in condition:
                raise StopConfigError("each stop condition needs a 'type'")
            kind = condition["type"]
            try:
                if kind == "max_rounds":
                    values["max_rounds"] = int(condition["rounds"])
                elif kind == "timeout":
                    values["timeout_seconds"] = float(condition["seconds"])
                elif kind == "token_budget":
                    values["token_budget"] = int(condition["max_total"])
                elif kind == "consecutive_errors":
                    values["consecutive_errors"] = int(condition["max"])
                else:
                    raise StopConfigError(
                        f"unknown stop condition {kind!r}; known: {', '.join(KNOWN_TYPES)}"
                    )
            except (KeyError, TypeError, ValueError) as exc:
                if isinstance(exc, StopConfigError):
                    raise
                raise StopConfigError(
                    f"stop condition {kind!r} is missing or has a bad value: {exc}"
                ) from exc
        policies = cls(**values)
        for name, value in values.items():
            if value < 0:
                raise StopConfigError(f"{name} must not be negative")
        return policies

    def check(
        self, stats: StopStats, input_tokens: int, output_tokens: int
    ) -> tuple[str, str] | None:
        """Return (code, detail) of the first policy that fires, else None."""
        if self.max_rounds and stats.inferences > self.max_rounds:
            return "max_rounds", f"exceeded {self.max_rounds} rounds"
        if self.timeout_seconds and time.time() - stats.started_at > self.timeout_seconds:
            return "timeout", f"exceeded {self.timeout_seconds:g} seconds"
        if self.token_budget and input_tokens + output_tokens > self.token_budget:
            return (
                "token_budget",
                f"used {input_tokens + output_tokens} of {self.token_budget} tokens",
            )
        if self.consecutive_errors and stats.consecutive_errors >= self.consecutive_errors:
            return "consecutive_errors", f"{stats.consecutive_errors} consecutive failed steps"
        return None
