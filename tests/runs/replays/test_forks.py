"""Forking a run at a step boundary (runs/replays/services/forks.py): the copied prefix, edits,
pinned versions, bad input, the audit entry, queued and steered input, and the pages."""

from __future__ import annotations

from typing import Any

import pytest
from django.forms.models import model_to_dict

from agents.errors import AgentConfigInvalid
from agents.models import AgentVersion
from common.audit import Actor
from common.errors import InvalidInput
from common.models import AuditEntry
from runs.models import Message, Run, RunEvent, Thread
from runs.replays.selectors.forks import fork_boundaries, fork_cuts
from runs.replays.services.forks import run_fork
from runs.services.submission_flow import input_submit, run_start
from tests.factories import call, publish, scripted_agent, user_with_role
from tests.runs.helpers import drive

pytestmark = pytest.mark.django_db

SCRIPT = [
    {"text": "computing", "tool_calls": [call("calculator", {"expression": "2+3"})]},
    {"text": "again", "tool_calls": [call("calculator", {"expression": "5*7"})]},
    {"text": "The answer is {last_tool_result}."},
]
ACTOR = Actor(label="olga", source="ui")


def three_step_run(**kwargs: Any) -> Run:
    agent = scripted_agent(SCRIPT, tools=["calculator"], **kwargs)
    run = drive(run_start(agent=agent, messages="compute"))
    assert run.status == Run.Status.DONE and run.steps == 3, run.status_reason
    return run


def message_shape(m: Message) -> tuple[Any, ...]:
    return (m.role, m.content, m.tool_calls, m.tool_call_id, m.visibility)


def thread_rows(thread_id: Any) -> list[dict[str, Any]]:
    return [model_to_dict(m) | {"id": m.pk} for m in Message.objects.filter(thread_id=thread_id)]


def snapshot(run: Run) -> dict[str, Any]:
    """Everything of the original a fork must not change."""
    run.refresh_from_db()
    return {
        "run": model_to_dict(Run.objects.get(pk=run.pk)),
        "thread": model_to_dict(Thread.objects.get(pk=run.thread_id)),
        "messages": thread_rows(run.thread_id),
        "events": list(RunEvent.objects.filter(run=run).values_list("seq", "payload")),
        "runs_on_thread": Run.objects.filter(thread_id=run.thread_id).count(),
    }


def test_fork_at_each_step_boundary_copies_the_prefix_exactly():
    run = three_step_run()
    before = snapshot(run)
    original = list(Message.objects.filter(thread=run.thread).order_by("seq"))
    assert fork_cuts(run) == [1, 3, 5, 6]
    for step, cut in enumerate([1, 3, 5, 6]):
        fork = run_fork(run=run, step=step, actor=ACTOR)
        copies = list(Message.objects.filter(thread=fork.thread).order_by("seq"))
        assert [m.seq for m in copies] == list(range(1, cut + 1))
        assert [message_shape(m) for m in copies] == [message_shape(m) for m in original[:cut]]
        assert not {m.pk for m in copies} & {m.pk for m in original}
        assert all(m.produced_by_run_id is None and m.step_index is None for m in copies)
        assert fork.thread_id != run.thread_id and fork.thread.message_count == cut
        assert fork.input["range"] == {"from_seq": 1, "to_seq": cut}
        assert fork.input["trigger_message_ids"] == [str(m.pk) for m in copies]
        assert (fork.forked_from_id, fork.fork_step, fork.fork_edit) == (run.pk, step, None)
        assert fork.run_mode == "fork" and fork.agent_version_id == run.agent_version_id
        assert fork.status == Run.Status.CREATED and fork.due
    assert snapshot(run) == before
    # the forks run on from where they were cut: the scripted model plays turn N
    finals = [
        drive(f).final_output for f in Run.objects.filter(forked_from=run).order_by("fork_step")
    ]
    assert finals[:3] == [run.final_output] * 3
    assert finals[3] == "(end of script)"
    assert snapshot(run) == before


def test_an_edited_tool_result_changes_the_final_answer():
    run = three_step_run()
    before = snapshot(run)
    edited = '{"expression": "5*7", "result": 36}'
    fork = run_fork(run=run, step=2, edit={"seq": 5, "text": edited}, actor=ACTOR)
    assert fork.fork_edit == {
        "seq": 5,
        "role": "tool",
        "before": '{"expression": "5*7", "result": 35}',
        "after": edited,
    }
    fork = drive(fork)
    assert fork.final_output == f"The answer is {edited}."
    assert run.final_output == 'The answer is {"expression": "5*7", "result": 35}.'
    assert snapshot(run) == before


def test_the_last_user_message_can_be_edited():
    run = three_step_run()
    fork = run_fork(run=run, step=0, edit={"seq": 1, "text": "compute twice"}, actor=ACTOR)
    (copy,) = Message.objects.filter(thread=fork.thread)
    assert copy.text == "compute twice" and copy.role == "user"
    assert fork.fork_edit["before"] == "compute" and fork.thread.title == "compute twice"


def test_version_choices_pin_the_right_agent_version():
    run = three_step_run()
    agent = run.agent
    agent.system_prompt = "Version two."
    agent.save()
    v2 = publish(agent)
    assert run_fork(run=run, step=1, version="original", actor=ACTOR).agent_version == (
        run.agent_version
    )
    assert run_fork(run=run, step=1, version="latest", actor=ACTOR).agent_version == v2
    agent.system_prompt = "An unpublished draft."
    agent.save()
    draft = run_fork(run=run, step=1, version="draft", actor=ACTOR).agent_version
    assert draft.draft and draft.spec["system_prompt"] == "An unpublished draft."
    again = run_fork(run=run, step=2, version="draft", actor=ACTOR).agent_version
    assert again == draft  # an unchanged draft reuses its snapshot
    agent.tools = ["no_such_tool"]
    agent.save()
    counts = (Run.objects.count(), Thread.objects.count(), AgentVersion.objects.count())
    with pytest.raises(AgentConfigInvalid, match="cannot run"):
        run_fork(run=run, step=1, version="draft", actor=ACTOR)
    assert (Run.objects.count(), Thread.objects.count(), AgentVersion.objects.count()) == counts


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"step": -1}, "step must be a step boundary"),
        ({"step": 4}, "0 \\(before its first step\\) to 3"),
        ({"step": "1"}, "step must be"),
        ({"step": True}, "step must be"),
        ({"step": 1, "version": "newest"}, "version must be one of original, latest, draft"),
        ({"step": 1, "edit": {"seq": 2, "text": "x"}}, "#2 is a assistant message"),
        ({"step": 1, "edit": {"seq": 5, "text": "x"}}, "not part of the conversation at step 1"),
        ({"step": 1, "edit": {"seq": 3, "text": "  "}}, "non-empty"),
        ({"step": 1, "edit": {"seq": 3}}, "edit must be an object"),
        ({"step": 1, "edit": {"seq": "3", "text": "x"}}, "edit.seq must be an integer"),
        ({"step": 1, "edit": {"seq": 3, "text": "a\x00b"}}, "edit.text contains"),
    ],
)
def test_bad_input_is_refused_and_creates_nothing(kwargs, message):
    run = three_step_run()
    before = snapshot(run)
    counts = (Run.objects.count(), Thread.objects.count(), Message.objects.count())
    audits = AuditEntry.objects.count()
    with pytest.raises(InvalidInput, match=message):
        run_fork(run=run, actor=ACTOR, **kwargs)
    assert (Run.objects.count(), Thread.objects.count(), Message.objects.count()) == counts
    assert AuditEntry.objects.count() == audits
    assert snapshot(run) == before


def test_a_fork_is_audited():
    run = three_step_run()
    fork = run_fork(run=run, step=2, version="latest", edit={"seq": 3, "text": "7"}, actor=ACTOR)
    entry = AuditEntry.objects.get(action="run.fork")
    assert entry.target_id == str(run.pk) and entry.actor_label == "olga"
    assert entry.after["run"] == str(fork.pk) and entry.after["step"] == 2
    assert entry.after["version"] == "latest" and entry.after["edit"]["seq"] == 3


def test_earlier_runs_on_the_thread_are_part_of_the_prefix_but_only_the_last_user_message_is_editable():
    first = three_step_run()
    second = drive(run_start(agent=first.agent, messages="once more", thread=first.thread))
    assert second.status == Run.Status.DONE
    cuts = fork_cuts(second)
    assert cuts[0] == 7  # the first run's six messages and the new input
    fork = run_fork(run=second, step=0, actor=ACTOR)
    assert fork.thread.message_count == 7
    with pytest.raises(InvalidInput, match="only the last user message or a tool result"):
        run_fork(run=second, step=0, edit={"seq": 1, "text": "x"}, actor=ACTOR)
    # the first run's forks never include what the second one wrote
    assert fork_cuts(first) == [1, 3, 5, 6]


def test_a_run_started_by_queued_input_and_steered_between_steps():
    agent = scripted_agent(SCRIPT, tools=["calculator"])
    first = run_start(agent=agent, messages="compute")
    queued = input_submit(agent=agent, messages="and then this", thread=first.thread, mode="queue")
    steer = input_submit(agent=agent, messages="mind the units", run=first, mode="steer")
    assert queued.input is not None and steer.input is not None
    first = drive(first)
    # the steer input was delivered after step 1 (seq 4), before step 2's output
    rows = list(Message.objects.filter(thread=first.thread).order_by("seq"))
    assert (rows[3].role, rows[3].text, rows[3].produced_by_run_id) == (
        "user",
        "mind the units",
        None,
    )
    assert fork_cuts(first)[:3] == [1, 4, 6]
    fork = run_fork(run=first, step=1, actor=ACTOR)
    assert [m.text for m in Message.objects.filter(thread=fork.thread).order_by("seq")][-1] == (
        "mind the units"
    )
    second = Run.objects.exclude(pk=first.pk).get(thread=first.thread)
    second = drive(second)
    start = second.input["range"]["to_seq"]
    assert start == fork_cuts(first)[-1] + 1  # the queued input follows the first run's part
    assert rows[start - 1].text == "and then this"
    assert fork_cuts(second)[0] == start
    fork = run_fork(run=second, step=0, edit={"seq": start, "text": "instead this"}, actor=ACTOR)
    assert Message.objects.get(thread=fork.thread, seq=start).text == "instead this"


def test_boundaries_have_previews():
    run = three_step_run()
    boundaries = fork_boundaries(run)
    assert [b.step for b in boundaries] == [0, 1, 2, 3]
    assert boundaries[0].preview == "User: compute"
    assert "calls calculator" in boundaries[1].preview and "5" in boundaries[1].preview
    assert boundaries[3].preview.startswith("Agent: The answer is")


# --- the run page ---------------------------------------------------------------------------


def test_the_page_forks_and_shows_provenance(client):
    run = three_step_run()
    client.force_login(user_with_role("operator", "olga"))
    page = client.get(f"/runs/{run.pk}/")
    assert b'id="fork-panel"' in page.content and b"after step 2" in page.content
    form = client.get(f"/runs/{run.pk}/fork/form", {"step": "2", "edit_seq": "5"})
    assert b"result&quot;: 35}</textarea>" in form.content
    response = client.post(
        f"/runs/{run.pk}/fork",
        {"step": "2", "version": "original", "edit_seq": "5", "edit_text": "36"},
    )
    fork = Run.objects.get(forked_from=run)
    assert response.status_code == 302 and response["Location"] == f"/runs/{fork.pk}/"
    assert fork.fork_edit["after"] == "36"
    page = client.get(f"/runs/{fork.pk}/").content.decode()
    assert "forked from run" in page and f'href="/runs/{run.pk}/"' in page
    assert "edited message #5" in page
    assert f"/runs/compare/?a={run.pk}&amp;b={fork.pk}" in page
    original = client.get(f"/runs/{run.pk}/").content.decode()
    assert "1 fork" in original and f'href="/runs/{fork.pk}/"' in original


def test_a_bad_fork_from_the_page_says_why_and_creates_nothing(client):
    run = three_step_run()
    client.force_login(user_with_role("operator", "olga"))
    response = client.post(
        f"/runs/{run.pk}/fork", {"step": "1", "version": "original", "edit_seq": "2"}
    )
    assert response.status_code == 400
    assert b"assistant message" in response.content
    assert not Run.objects.filter(forked_from=run).exists()


def test_a_viewer_sees_the_forks_but_no_form(client):
    run = three_step_run()
    fork = run_fork(run=run, step=1, actor=ACTOR)
    client.force_login(user_with_role("viewer", "vic"))
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="fork-panel"' not in page and f'href="/runs/{fork.pk}/"' in page
    response = client.post(f"/runs/{run.pk}/fork", {"step": "1", "version": "original"})
    assert response.status_code == 403
    assert client.get(f"/runs/{run.pk}/fork/form").status_code == 403
    assert Run.objects.filter(forked_from=run).count() == 1
