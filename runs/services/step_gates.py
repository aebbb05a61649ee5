"""What may hold a run's next step before it calls the model: the gates the apps declare
in the setting `AWAKEN_STEP_GATES` (operations' budgets, docs/budgets.md).

Each entry is a factory given the claimed run: None when it never holds that run (and
then costs it nothing), or a callable asked before each step that answers None (go on)
or the status reason the run waits with instead (`budget`). Whatever makes the run due
again is the gate's app's (a sweep step, a raised limit)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runs.services.declared import declared

Gate = Callable[[], str | None]


def run_step_gate(run: Any) -> Gate | None:
    """The run's gate: the declared ones that apply to it, asked in order; None if none."""
    gates = [gate for make in declared("AWAKEN_STEP_GATES") if (gate := make(run)) is not None]
    if len(gates) < 2:
        return gates[0] if gates else None

    def ask_all() -> str | None:
        for gate in gates:
            if reason := gate():
                return reason
        return None

    return ask_all
