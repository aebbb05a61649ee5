"""The submission command (runs.services.submission): one validation for every way in.
A bad field is refused in the same words by the command itself, the API, the pages, the
CLI and A2A; the priority's bounds are compared in one module only."""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Callable
from html import unescape
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from a2a.types import Message, Part, Role
from a2a.utils.errors import InvalidParamsError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from common.errors import InvalidInput
from runs.a2a_server.actions import Caller, message_send
from runs.models import PendingInput, Run
from runs.services.submission import START, Submission, priority_check, priority_parse
from runs.services.submission_flow import submission_accept
from tests.api.helpers import assert_error
from tests.factories import done_run, user_with_role

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
PRIORITY_SAID = "priority must be an integer from 0 (high) to 255 (low), got 300"
MODE_SAID = "mode must be one of queue, steer, interrupt_then_queue, resume_open_run, got 'later'"
# its subject: "the message" (a plain text) or "messages[0].content" (a list)
LONG_SAID = "is 11 characters long; at most 10 are allowed"
# (the field, what the caller sends, what every surface answers)
BAD = {
    "priority": ({"priority": 300}, PRIORITY_SAID),
    "mode": ({"mode": "later"}, MODE_SAID),
    "messages": ({"text": "x" * 11}, LONG_SAID),
}


def _command(run: Run, fields: dict[str, Any], _: Any) -> str:
    text = fields.pop("text", "more")
    with pytest.raises(InvalidInput) as refused:
        Submission.build(agent=run.agent, messages=text, thread=run.thread, **fields)
    return refused.value.message


def _rest(run: Run, fields: dict[str, Any], clients: Any) -> str:
    text = fields.pop("text", "more")
    body = {"messages": [{"role": "user", "content": text}], **fields}
    path = f"/api/v1/threads/{run.thread_id}/messages"
    response = clients.getfixturevalue("operator_api").post(path, body, format="json")
    return str(assert_error(response, 400, "invalid")["message"])


def _page(run: Run, fields: dict[str, Any], clients: Any) -> str:
    form = {"agent": run.agent.slug, "message": fields.pop("text", "more"), **fields}
    url = reverse("runs:thread-send", args=[run.thread_id])
    response = clients.getfixturevalue("operator_client").post(url, form)
    assert response.status_code == 400
    return unescape(response.content.decode())


def _cli(run: Run, fields: dict[str, Any], _: Any) -> str:
    args = [str(run.thread_id), fields.pop("text", "more")]
    for name, value in fields.items():
        args += [f"--{name}", str(value)]
    with pytest.raises(CommandError) as refused:
        call_command("send_input", *args, stdout=StringIO())
    return str(refused.value)


def _a2a(run: Run, fields: dict[str, Any], _: Any) -> str:
    message = Message(role=Role.ROLE_USER, message_id="m-1", parts=[Part(text=fields["text"])])
    caller = Caller(user=user_with_role("operator", "a2a-sub"), token_name="t", agent=run.agent)
    with pytest.raises(InvalidParamsError) as refused:
        message_send(run.agent, message, caller)
    return str(refused.value)


SURFACES: dict[str, Callable[[Run, dict[str, Any], Any], str]] = {
    "command": _command,
    "rest": _rest,
    "page": _page,
    "cli": _cli,
    "a2a": _a2a,
}
CASES = [
    (surface, field)
    for surface in SURFACES
    for field in BAD
    if surface != "a2a" or field == "messages"  # A2A sends neither a mode nor a priority
]


@pytest.mark.parametrize(("surface", "field"), CASES)
def test_each_bad_field_is_refused_in_the_same_words_on_every_surface(
    request, settings, surface, field
):
    settings.AWAKEN_MAX_MESSAGE_CHARS = 10
    run = done_run()
    fields, said = BAD[field]
    answer = SURFACES[surface](run, dict(fields), request)
    assert said in answer
    assert Run.objects.filter(thread=run.thread).count() == 1  # nothing started
    assert not PendingInput.objects.filter(thread=run.thread).exists()  # nothing queued


def test_the_command_checks_its_fields_once_when_built():
    run = done_run()
    command = Submission.build(agent=None, messages="  more  ", thread=run.thread, priority=7)
    assert [m.text() for m in command.messages] == ["  more  "] and command.priority == 7
    with pytest.raises(AttributeError):
        command.priority = 300  # type: ignore[misc]  # frozen: valid as built
    with pytest.raises(InvalidInput, match="messages must be a non-empty list"):
        Submission.build(agent=None, messages=[], thread=run.thread)
    with pytest.raises(InvalidInput, match="idempotency_key must be text of at most 200"):
        Submission.build(agent=run.agent, messages="x", idempotency_key="k" * 201)
    with pytest.raises(InvalidInput, match="agent_id is required") as refused:
        Submission.build_start(agent=None, messages="x")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="mode must be one of"):
        Submission.build(agent=run.agent, messages="x", mode=START)  # the run API's own
    assert refused.value.details == {"agent_id": ["This field is required."]}


def test_the_priority_rule_gives_field_errors_and_parses_forms():
    assert priority_check(0) == 0 and priority_check(255) == 255
    for bad in (-1, 256, "7", None):
        with pytest.raises(InvalidInput, match="priority must be an integer from 0") as refused:
            priority_check(bad)
        assert refused.value.details == {"priority": [str(bad)]}
    assert priority_parse("") == 128 and priority_parse(" 4 ") == 4
    with pytest.raises(InvalidInput, match="got 'high'"):
        priority_parse("high")


def test_accepting_start_continues_a_waiting_run_and_answers_a_key_repeat():
    run = done_run()
    command = Submission.build_start(
        agent=run.agent, messages="again", thread=run.thread, idempotency_key="k1"
    )
    first = submission_accept(command)
    assert first.created and first.input is None and first.run is not None
    repeat = submission_accept(command)
    assert repeat.repeat and not repeat.created and repeat.run == first.run
    assert Run.objects.filter(thread=run.thread).count() == 2


# --- the priority's bounds live in one module ---------------------------------------------------

OPERATOR = r"(?:<=|>=|<|(?<![-=])>)"  # not the arrow of an annotation
COMPARED = re.compile(rf"priority\w*\s*{OPERATOR}|{OPERATOR}\s*\w*priority", re.I)
ALLOWED = {"runs/services/submission.py"}
BOUNDS_DEFINED = "runs/models/core.py"  # PRIORITY_MIN, PRIORITY_MAX: the constants


def bound_uses(source: str) -> list[str]:
    """The lines of `source` that write 255 as a number or compare a priority."""
    found = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.NUMBER and token.string == "255":
            found.append(token.line.strip())
        elif token.type == tokenize.NAME and "priority" in token.string.lower():
            found += [token.line.strip()] if COMPARED.search(token.line) else []
    return found


def test_the_scanner_finds_a_written_again_bound():
    assert bound_uses("if not 0 <= priority <= 255:\n    pass\n")
    assert bound_uses("x = IntegerField(min_value=0, max_value=255)\n")
    assert bound_uses("if run.priority > LIMIT:\n    pass\n")
    assert not bound_uses('help = "0 (high) … 255 (low)"\npriority = 3\n')
    assert not bound_uses("def field() -> PriorityField:\n    pass\n")


def test_no_module_but_the_submissions_compares_a_priority_or_writes_its_bounds():
    offenders = []
    for package in ("runs", "agents", "common", "awaken_site"):
        for path in sorted((ROOT / package).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if "/migrations/" in name or name in ALLOWED:
                continue
            uses = bound_uses(path.read_text())
            if name == BOUNDS_DEFINED:
                uses = [u for u in uses if not u.startswith("PRIORITY_MIN, PRIORITY_MAX =")]
            offenders += [f"{name}: {use}" for use in uses]
    assert offenders == []
