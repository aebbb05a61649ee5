"""Every run starts through the submission command (runs.services.submission*): REST, pages,
CLI, A2A, schedules, forks, replays and the delivery of queued input. No module outside
runs/services/submission*.py calls (or imports) `run_create`, so the command's validation
and its locking are the only way to a new run. The NEW_RUN command's own rules: a
history (any role, as stored) instead of new input, a run mode, known provenance."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from django.db import transaction

from agents.models import Agent
from common.errors import InvalidInput
from runs.runtime import types as rt
from runs.services.submission import (
    NEW_RUN,
    Origin,
    Submission,
    ThreadBusy,
    history_check,
)
from runs.services.submission_flow import submission_accept, submission_accept_within
from tests.factories import done_run

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("runs", "agents", "common", "awaken_site")
ENTRY = "run_create"


def _allowed(path: Path) -> bool:
    relative = path.relative_to(ROOT).as_posix()
    return relative == "runs/services/creation.py" or (
        relative.startswith("runs/services/submission") and relative.endswith(".py")
    )


def run_create_uses(source: str) -> list[int]:
    """The lines of `source` that call or import `run_create` (by name or attribute)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name == ENTRY:
                lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and any(a.name == ENTRY for a in node.names):
            lines.append(node.lineno)
    return sorted(lines)


def test_the_scan_finds_a_call_an_attribute_call_and_an_import() -> None:
    source = (
        "from runs.services.creation import run_create\n"
        "from runs.services import creation\n"
        "run_create(thread, agent, [], actor)\n"
        "creation.run_create(thread, agent, [], actor)\n"
        "def run_create_later(): pass\n"
    )
    assert run_create_uses(source) == [1, 3, 4]
    assert run_create_uses("submission_accept(cmd)\n") == []


def test_no_module_outside_the_submission_command_creates_a_run() -> None:
    offenders = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if _allowed(path):
                continue
            for line in run_create_uses(path.read_text(encoding="utf-8")):
                offenders.append(f"{path.relative_to(ROOT)}:{line}")
    assert not offenders, (
        "these modules create runs without the submission command "
        f"(build a Submission and accept it instead): {offenders}"
    )
    # the command's own modules do call it: the scan is looking at the right thing
    start = ROOT / "runs/services/submission_start.py"
    assert run_create_uses(start.read_text(encoding="utf-8"))


def test_history_is_checked_by_its_own_rule() -> None:
    tool = rt.Message(role=rt.Role.TOOL, content=[{"type": "tool_result", "content": "4"}])
    assert history_check([tool]) == (tool,)
    with pytest.raises(InvalidInput, match="non-empty"):
        history_check([])
    with pytest.raises(InvalidInput, match=r"history\[0\] is not a message"):
        history_check([{"role": "tool", "content": "4"}])
    broken = rt.Message(role=rt.Role.USER, content="text")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match=r"history\[0\]\.content"):
        history_check([broken])


@pytest.mark.django_db
def test_a_new_run_takes_messages_or_history_a_known_mode_and_known_provenance() -> None:
    agent = Agent(slug="a")
    history = [rt.Message(role=rt.Role.ASSISTANT, content=[{"type": "text", "text": "hi"}])]
    with pytest.raises(InvalidInput, match="either messages or a history"):
        Submission.build_new_run(agent=agent, messages="hi", history=history)
    with pytest.raises(InvalidInput, match="either messages or a history"):
        Submission.build_new_run(agent=agent)
    with pytest.raises(InvalidInput, match="run_mode must be one of"):
        Submission.build_new_run(agent=agent, messages="hi", origin=Origin(run_mode="later"))
    with pytest.raises(InvalidInput, match="unknown provenance fields: colour"):
        Submission.build_new_run(agent=agent, messages="hi", colour="red")
    with pytest.raises(InvalidInput, match="priority must be"):
        Submission.build_new_run(agent=agent, history=history, priority=300)
    # user input is normalized as any sender's: an assistant message is refused there
    with pytest.raises(InvalidInput, match="is empty"):
        Submission.build_new_run(agent=agent, messages=[{"role": "user", "content": " "}])
    cmd = Submission.build_new_run(agent=agent, history=history, fork_step=2)
    assert (cmd.mode, cmd.message_list, cmd.provenance) == (NEW_RUN, history, {"fork_step": 2})


@pytest.mark.django_db
def test_a_new_run_on_a_thread_with_an_open_run_is_refused_and_without_one_starts() -> None:
    first = done_run()
    agent = first.agent
    cmd = Submission.build_new_run(agent=agent, messages="again", thread=first.thread)
    run = submission_accept(cmd).run
    assert run is not None and run.thread_id == first.thread_id and run.pk != first.pk
    with pytest.raises(ThreadBusy, match="previous run still open"):
        submission_accept(cmd)
    history = [rt.Message(role=rt.Role.ASSISTANT, content=[{"type": "text", "text": "so far"}])]
    copy = Submission.build_new_run(
        agent=agent, history=history, origin=Origin(run_mode="fork", title_prefix="copy: ")
    )
    with transaction.atomic():  # forks, replays, schedules: in their own transaction
        outcome = submission_accept_within(copy)
    assert outcome.run is not None and outcome.created
    assert outcome.run.run_mode == "fork" and outcome.run.thread.title == "copy: "
    assert outcome.run.thread.team_id == agent.team_id


@pytest.mark.django_db(transaction=True)
def test_accepting_within_a_transaction_requires_one() -> None:
    agent = done_run().agent
    cmd = Submission.build_new_run(agent=agent, messages="hello")
    with pytest.raises(RuntimeError, match="caller's transaction"):
        submission_accept_within(cmd)
