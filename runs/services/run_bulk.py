"""Cancel or retry many runs at once (the runs list's selection, POST
/api/v1/runs/bulk-action): each run on its own, reported as done, already done, or
refused with the reason.

The teams' rules apply as to one run: a cancel needs a reason where a team requires one
(asked before anything changes), more runs than a team's bulk_confirm_above need a
confirmation, the actor's role in each run's team must allow the action, and a frozen
team's runs are refused (the others go through). It is idempotent: a run already
cancelled (or asked to stop) is reported as such, not cancelled again, and a run that
was already retried is not retried a second time. Each cancel or retry is audited as a
single one is (run.cancel, run.retry), plus one runs.bulk_cancel / runs.bulk_retry entry
with the counts and what became of each run."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from common.audit import SYSTEM, Actor, audit_record
from common.errors import Frozen, IllegalTransition, InvalidInput, ServiceError
from common.teams import check_reason, ensure_confirmed, ensure_may, ensure_reason
from runs.models import Run
from runs.permissions import CANCEL, RETRY, VIEW
from runs.services.runs import run_cancel, run_retry

MAX_BULK = 500  # runs (here) or tickets (runs.decisions.services.bulk) acted on at once
RUN_ACTIONS = {"cancel": (CANCEL, "cancelled"), "retry": (RETRY, "retried")}
DONE, ALREADY, REFUSED = "done", "already", "refused"


@dataclass
class RunItem:
    """What became of one run: `done` (cancelled, or asked to stop while a worker holds
    it; retried as `new_run_id`), `already` (nothing to do: `message` says why) or
    `refused` (`message` says why)."""

    run_id: str
    outcome: str
    run: Run | None = None
    message: str = ""
    new_run_id: str = ""

    @property
    def label(self) -> str:
        return f"run {self.run_id[-8:]}"

    def to_json(self) -> dict[str, Any]:
        result = {"run_id": self.run_id, "outcome": self.outcome}
        if self.message:
            result["message"] = self.message
        if self.new_run_id:
            result["new_run_id"] = self.new_run_id
        return result


@dataclass
class RunBulkOutcome:
    action: str
    items: list[RunItem] = field(default_factory=list)

    def _with(self, outcome: str) -> list[RunItem]:
        return [item for item in self.items if item.outcome == outcome]

    @property
    def done(self) -> list[RunItem]:
        return self._with(DONE)

    @property
    def already(self) -> list[RunItem]:
        return self._with(ALREADY)

    @property
    def refused(self) -> list[RunItem]:
        return self._with(REFUSED)

    @property
    def verb(self) -> str:
        return RUN_ACTIONS[self.action][1]

    @property
    def level(self) -> str:
        if not self.refused:
            return "success"
        return "warning" if self.done or self.already else "error"

    @property
    def summary(self) -> str:
        text = f"{len(self.done)} {self.verb}"
        if self.already:
            text += f", {len(self.already)} already {self.verb}"
        if self.refused:
            text += f", {len(self.refused)} refused: " + "; ".join(
                f"{item.label}: {item.message}" for item in self.refused
            )
        return text + "."


def unique_run_ids(run_ids: Iterable[Any]) -> list[uuid.UUID | str]:
    """The ids in the order given, each once; one that is not a UUID is kept as text (it
    is reported as no such run)."""
    ids: list[uuid.UUID | str] = []
    for raw in run_ids:
        try:
            ident: uuid.UUID | str = uuid.UUID(str(raw).strip())
        except ValueError:
            ident = str(raw)[:64]
        if ident not in ids:
            ids.append(ident)
    return ids


def _visible(ids: list[uuid.UUID | str], user: Any) -> dict[Any, Run]:
    """The named runs `user` may see (another team's run is as an unknown one)."""
    uuids = [ident for ident in ids if isinstance(ident, uuid.UUID)]
    runs = Run.objects.filter(pk__in=uuids).select_related("agent", "agent_version")
    return {run.pk: run for run in runs if user is None or user.has_perm(VIEW, run)}


def bulk_guard(runs: Iterable[Run], action: str, reason: str, confirmed: bool) -> None:
    """Before anything changes: the reason's length, a reason for a cancel where one of
    the teams requires one (InvalidInput), and a confirmation above the lowest threshold
    of the teams (ConfirmationRequired)."""
    check_reason(reason)
    items = list(runs)
    team_ids = sorted({run.agent.team_id for run in items if run.agent.team_id is not None})
    if action == "cancel":
        for team_id in team_ids:
            ensure_reason(team_id, reason, "cancel a run")
    ensure_confirmed(team_ids, len(items), confirmed)


def _cancel(run: Run, reason: str, actor: Actor) -> RunItem:
    ident = str(run.pk)
    if run.status == Run.Status.DONE:
        if run.status_reason == "cancelled":
            return RunItem(ident, ALREADY, run, "already cancelled")
        return RunItem(ident, REFUSED, run, f"already finished ({run.status_reason or 'done'})")
    if run.cancel_requested_at is not None:
        return RunItem(ident, ALREADY, run, "already asked to stop")
    try:
        run = run_cancel(run=run, actor=actor, reason=reason)
    except Frozen:
        raise
    except IllegalTransition:  # finished meanwhile: cancelled by someone else, or ended
        run.refresh_from_db()
        if run.status_reason == "cancelled":
            return RunItem(ident, ALREADY, run, "already cancelled")
        return RunItem(ident, REFUSED, run, f"already finished ({run.status_reason or 'done'})")
    if run.status != Run.Status.DONE:
        return RunItem(ident, DONE, run, "asked to stop: its worker stops at its next check")
    return RunItem(ident, DONE, run)


def _retried(run: Run) -> RunItem | None:
    earlier = Run.objects.filter(retry_of=run).order_by("-created_at").values_list("pk").first()
    if earlier is None:
        return None
    new = str(earlier[0])
    return RunItem(str(run.pk), ALREADY, run, f"already retried as run {new[-8:]}", new)


def _retry(run: Run, actor: Actor) -> RunItem:
    known = _retried(run)
    if known is not None:
        return known
    try:
        new = run_retry(run=run, actor=actor)
    except Frozen:
        raise
    except IllegalTransition as exc:  # retried meanwhile (its thread is busy), or not failed
        return _retried(run) or RunItem(str(run.pk), REFUSED, run, exc.message)
    return RunItem(str(run.pk), DONE, run, new_run_id=str(new.pk))


def _one(ident: Any, run: Run | None, action: str, reason: str, actor: Actor) -> RunItem:
    if run is None:
        return RunItem(str(ident), REFUSED, message="no such run")
    perm = RUN_ACTIONS[action][0]
    try:  # the role in its team; a frozen team refuses, saying why
        ensure_may(actor.user_or_none, perm, run, f"{action} runs in its team")
        return _cancel(run, reason, actor) if action == "cancel" else _retry(run, actor)
    except ServiceError as exc:
        return RunItem(str(run.pk), REFUSED, run, exc.message)


def bulk_run_action(
    run_ids: Iterable[Any],
    action: str,
    reason: str = "",
    actor: Actor = SYSTEM,
    *,
    confirm: bool = False,
) -> RunBulkOutcome:
    """Cancel or retry each named run (in the order given), each in its own transaction;
    see the module's docstring for the rules. Raises InvalidInput (no runs, too many, a
    reason missing) or ConfirmationRequired before anything changes."""
    if action not in RUN_ACTIONS:
        raise InvalidInput(f"action must be cancel or retry, got {action!r}", {"field": "action"})
    ids = unique_run_ids(run_ids)
    if not ids:
        raise InvalidInput("Select at least one run.", {"field": "run"})
    if len(ids) > MAX_BULK:
        raise InvalidInput(f"Act on at most {MAX_BULK} runs at once.", {"field": "run"})
    reason = (reason or "").strip()
    found = _visible(ids, actor.user_or_none)
    bulk_guard(found.values(), action, reason, confirm)
    outcome = RunBulkOutcome(action)
    for ident in ids:
        outcome.items.append(_one(ident, found.get(ident), action, reason, actor))
    _audit(outcome, reason, actor)
    return outcome


def _audit(outcome: RunBulkOutcome, reason: str, actor: Actor) -> None:
    audit_record(
        actor=actor,
        action=f"runs.bulk_{outcome.action}",
        target_type="runs",
        target_id=f"{len(outcome.items)} runs",
        after={
            "requested": len(outcome.items),
            "done": [item.run_id for item in outcome.done],
            "already": {item.run_id: item.message for item in outcome.already},
            "refused": {item.run_id: item.message for item in outcome.refused},
            **(
                {"retries": {i.run_id: i.new_run_id for i in outcome.done if i.new_run_id}}
                if outcome.action == "retry"
                else {}
            ),
        },
        comment=reason,
    )
