"""Two runs side by side (docs/compare.md): the selector's JSON field by field, the page,
its links from the run page and the runs list, bounded queries and escaping."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from agents.models import AgentVersion
from common.audit import Actor
from runs.models import Run, Ticket
from runs.replays.selectors.compare import INPUT_SHOWN, run_compare, runs_for_compare, word_diff
from runs.replays.services.forks import run_fork
from runs.services.runs import run_retry
from runs.services.submission_flow import run_start
from runs.services.tickets import decision_submit
from tests.factories import call, scripted_agent, view_only_user, waiting_run
from tests.runs.helpers import drive

pytestmark = pytest.mark.django_db

XSS = "<script>alert(1)</script>"


def calculator_run(expression: str, answer: str, question: str = "compute it") -> Run:
    agent = scripted_agent(
        [
            {
                "text": "let me compute",
                "tool_calls": [call("calculator", {"expression": expression})],
            },
            {"text": answer},
        ]
    )
    return drive(run_start(agent=agent, messages=question))


def compared(a: Run, b: Run) -> dict[str, Any]:
    runs = runs_for_compare([a.pk, b.pk])
    return run_compare(runs[a.pk], runs[b.pk])


def summary(c: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["key"]: row for row in c["summary"]}


def decided_pair(operator_user: Any) -> tuple[Run, Run]:
    approved, rejected = waiting_run(), waiting_run()
    actor = Actor(user=operator_user)
    decision_submit(ticket=Ticket.objects.get(run=approved), action="approve", actor=actor)
    decision_submit(
        ticket=Ticket.objects.get(run=rejected), action="reject", comment="not now", actor=actor
    )
    return drive(approved), drive(rejected)


# --- the JSON ---------------------------------------------------------------------------------


def test_calculator_runs_align_by_step_and_mark_the_differences():
    a = calculator_run("2+2", "the answer is 4")
    b = calculator_run("2*3", "the answer is 6")
    c = compared(a, b)

    assert c["same_run"] is False
    assert (c["a"]["id"], c["b"]["id"]) == (str(a.pk), str(b.pk))
    assert [row["label"] for row in c["steps"]] == ["input", "step 0", "step 1"]
    assert [row["step"] for row in c["steps"]] == [None, 0, 1]
    assert c["different_steps"] == [0, 1]

    given = c["steps"][0]
    assert given["different"] is False and given["text_diff"] is None
    assert given["a"]["messages"] == [
        {"seq": 1, "role": "user", "text": "compute it", "tool_call_id": None}
    ]
    assert given["a"]["left_out"] == 0 and given["b"]["text"] == "compute it"

    first = c["steps"][1]  # same text, the tool call differs
    assert (first["text_different"], first["tools_different"], first["different"]) == (
        False,
        True,
        True,
    )
    assert first["a"]["text"] == first["b"]["text"] == "let me compute"
    [call_a], [call_b] = first["a"]["tool_calls"], first["b"]["tool_calls"]
    assert (call_a["name"], call_a["arguments"], call_a["status"]) == (
        "calculator",
        {"expression": "2+2"},
        "succeeded",
    )
    assert call_b["arguments"] == {"expression": "2*3"}
    assert '"result": 4' in call_a["result"] and '"result": 6' in call_b["result"]
    assert call_a["ticket"] is None

    second = c["steps"][2]  # the answers differ by one word
    assert (second["text_different"], second["tools_different"]) == (True, False)
    assert second["text_diff"] == [
        {"op": "equal", "text": "the answer is "},
        {"op": "delete", "text": "4"},
        {"op": "insert", "text": "6"},
    ]
    assert c["tickets"] == [] and c["steps_truncated"] is False


def test_summary_numbers_and_which_differ():
    a = calculator_run("2+2", "the answer is 4")
    b = calculator_run("2*3", "the answer is 6")
    start = dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    Run.objects.filter(pk=a.pk).update(
        started_at=start,
        finished_at=start + dt.timedelta(seconds=2),
        input_tokens=1000,
        output_tokens=100,
        input_price_per_million_usd=Decimal("3"),
        output_price_per_million_usd=Decimal("15"),
    )
    Run.objects.filter(pk=b.pk).update(
        started_at=start,
        finished_at=start + dt.timedelta(seconds=5),
        input_tokens=1000,
        output_tokens=300,
        input_price_per_million_usd=Decimal("3"),
        output_price_per_million_usd=Decimal("15"),
    )
    rows = summary(compared(a, b))

    assert list(rows) == [
        "outcome",
        "steps",
        "input_tokens",
        "output_tokens",
        "cost_usd",
        "duration_seconds",
        "agent",
        "agent_version",
    ]
    assert rows["outcome"] | {"label": ""} == {
        "key": "outcome",
        "label": "",
        "a": "done (natural)",
        "b": "done (natural)",
        "a_text": "done (natural)",
        "b_text": "done (natural)",
        "different": False,
    }
    assert (rows["steps"]["a"], rows["steps"]["b"], rows["steps"]["different"]) == (2, 2, False)
    assert (rows["input_tokens"]["a"], rows["input_tokens"]["different"]) == (1000, False)
    assert (rows["output_tokens"]["a"], rows["output_tokens"]["b"]) == (100, 300)
    assert rows["output_tokens"]["different"] is True
    # 1000 * 3 / 1e6 + 100 * 15 / 1e6 = 0.0045; with 300 out 0.0075
    assert (rows["cost_usd"]["a"], rows["cost_usd"]["b"]) == ("0.0045", "0.0075")
    assert (rows["cost_usd"]["a_text"], rows["cost_usd"]["b_text"]) == ("$0.0045", "$0.0075")
    assert rows["cost_usd"]["different"] is True
    assert (rows["duration_seconds"]["a"], rows["duration_seconds"]["b"]) == (2.0, 5.0)
    assert rows["duration_seconds"]["a_text"] == "2.0 s" and rows["duration_seconds"]["different"]
    assert rows["agent"]["different"] is True  # two scripted agents
    assert (rows["agent_version"]["a"], rows["agent_version"]["different"]) == ("v1", False)


def test_a_draft_snapshot_shows_as_vn_draft():
    a = calculator_run("2+2", "4")
    AgentVersion.objects.filter(pk=a.agent_version_id).update(draft=True)
    rows = summary(compared(a, calculator_run("2+2", "4")))
    assert (rows["agent_version"]["a"], rows["agent_version"]["b"]) == ("v1 draft", "v1")
    assert rows["agent_version"]["different"] is True


def test_approve_and_reject_show_in_the_tool_calls_and_the_tickets(operator_user):
    approved, rejected = decided_pair(operator_user)
    c = compared(approved, rejected)

    step = c["steps"][1]
    assert step["step"] == 0 and step["tools_different"] and not step["text_different"]
    [left], [right] = step["a"]["tool_calls"], step["b"]["tool_calls"]
    assert left["arguments"] == right["arguments"] == {"title": "lunch", "body": "b"}
    assert (left["status"], right["status"]) == ("succeeded", "cancelled")
    assert left["ticket"]["action"] == "approve" and right["ticket"]["action"] == "reject"
    assert "Rejected by olga: not now" in right["result"]

    [row] = c["tickets"]
    assert row["index"] == 0 and row["different"] is True
    for side, action, comment in [("a", "approve", ""), ("b", "reject", "not now")]:
        ticket = row[side]
        assert (ticket["tool_name"], ticket["status"], ticket["step"]) == (
            "write_note",
            "decided",
            0,
        )
        assert (ticket["action"], ticket["decided_by"], ticket["comment"]) == (
            action,
            "olga",
            comment,
        )
    assert c["different_steps"] == [0]  # the answer after it is the same


def test_a_shorter_run_has_no_side_for_the_steps_it_did_not_take():
    a = calculator_run("2+2", "the answer is 4")
    b = drive(run_start(agent=scripted_agent([{"text": "no tools"}]), messages="compute it"))
    c = compared(a, b)
    assert [row["step"] for row in c["steps"]] == [None, 0, 1]
    last = c["steps"][2]
    assert last["b"] is None and last["a"]["text"] == "the answer is 4"
    assert last["different"] and last["text_diff"] == [{"op": "delete", "text": "the answer is 4"}]


def test_the_same_run_twice_differs_nowhere():
    run = calculator_run("2+2", "4")
    c = compared(run, run)
    assert c["same_run"] is True and c["different_steps"] == []
    assert not any(row["different"] for row in c["summary"])


def test_a_retry_starts_with_the_messages_of_the_run_it_retried():
    failed = drive(run_start(agent=scripted_agent([{"error": "boom"}]), messages="try it"))
    retry = run_retry(run=failed)
    c = compared(failed, retry)
    assert c["b"]["retry_of"] == str(failed.pk)
    assert c["steps"][0]["b"]["messages"][0]["text"] == "try it"
    assert summary(c)["outcome"]["a"] == "done (error)"


FORKED_SCRIPT = [
    {"text": "computing", "tool_calls": [call("calculator", {"expression": "2+3"})]},
    {"text": "again", "tool_calls": [call("calculator", {"expression": "5*7"})]},
    {"text": "The answer is {last_tool_result}."},
]


def three_step_run() -> Run:
    agent = scripted_agent(FORKED_SCRIPT, tools=["calculator"])
    run = drive(run_start(agent=agent, messages="compute"))
    assert run.status == Run.Status.DONE and run.steps == 3
    return run


@pytest.mark.parametrize("step", [0, 1, 2, 3])
def test_a_fork_lines_up_with_its_original_after_the_copied_prefix(step):
    """The fork's copy of the original's steps stands beside those steps, and its own
    steps after them: a fork that did the same differs nowhere, from either side."""
    original = three_step_run()
    fork = drive(run_fork(run=original, step=step, actor=Actor(label="olga", source="ui")))
    assert fork.steps == 3 - step or step == 3
    for a, b in ((original, fork), (fork, original)):
        c = compared(a, b)
        shown = [(row["label"], row["a"], row["b"]) for row in c["steps"] if row["different"]]
        # after its last step the scripted model has nothing left to say: step 3 differs
        assert c["different_steps"] == ([] if step < 3 else [3]), shown
        assert [row["label"] for row in c["steps"]][:4] == ["input", "step 0", "step 1", "step 2"]
        assert [row.get("copied") for row in c["steps"][1:4]] == [i < step for i in range(3)]
        assert c["fork"] == {"original": str(original.pk), "fork": str(fork.pk), "step": step}
        assert c["steps"][0]["b"]["text"] == "compute" == c["steps"][0]["a"]["text"]
    c = compared(original, fork)
    for index in range(min(step, 2)):  # copied steps: the original's calls and results
        row = c["steps"][index + 1]
        assert row["a"]["text"] == row["b"]["text"]
        assert [t["copied"] for t in row["b"]["tool_calls"]] == [True]
        assert row["b"]["tool_calls"][0]["result"] == row["a"]["tool_calls"][0]["result"]


def test_a_fork_with_an_edited_result_differs_from_the_edit_on():
    original = three_step_run()
    edited = '{"expression": "5*7", "result": 36}'
    fork = run_fork(
        run=original, step=2, edit={"seq": 5, "text": edited}, actor=Actor(label="o", source="ui")
    )
    c = compared(original, drive(fork))
    assert c["different_steps"] == [1, 2]
    copied, own = c["steps"][2], c["steps"][3]
    assert copied["copied"] and (copied["text_different"], copied["tools_different"]) == (
        False,
        True,
    )
    assert copied["b"]["tool_calls"][0]["result"] == edited
    assert not own["copied"] and own["text_different"]
    assert own["b"]["text"] == f"The answer is {edited}."


def test_runs_not_forked_from_each_other_align_by_step_number():
    original = three_step_run()
    actor = Actor(label="o", source="ui")
    first, second = (drive(run_fork(run=original, step=s, actor=actor)) for s in (1, 2))
    c = compared(first, second)  # two forks of one run: neither is the other's original
    assert c["fork"] is None
    assert [row["copied"] for row in c["steps"][1:]] == [False] * (len(c["steps"]) - 1)


def test_a_long_input_lists_its_newest_messages_only():
    agent = scripted_agent([{"text": "ok"}])
    run = drive(
        run_start(
            agent=agent,
            messages=[{"role": "user", "content": f"m{i}"} for i in range(INPUT_SHOWN + 5)],
        )
    )
    given = compared(run, run)["steps"][0]["a"]
    assert len(given["messages"]) == INPUT_SHOWN and given["left_out"] == 5
    assert given["messages"][-1]["text"] == f"m{INPUT_SHOWN + 4}"


def test_word_diff_keeps_whitespace_and_merges_runs_of_one_op():
    assert word_diff("a b c", "a x y c") == [
        {"op": "equal", "text": "a "},
        {"op": "delete", "text": "b"},
        {"op": "insert", "text": "x y"},
        {"op": "equal", "text": " c"},
    ]
    assert word_diff("", "new") == [{"op": "insert", "text": "new"}]


# --- bounded reads ----------------------------------------------------------------------------


def long_run(steps: int) -> Run:
    script = [
        {"text": f"step {i}", "tool_calls": [call("calculator", {"expression": f"{i}+1"})]}
        for i in range(steps)
    ]
    agent = scripted_agent([*script, {"text": "done"}])
    return drive(run_start(agent=agent, messages="go"), limit=50)


def count(a: Run, b: Run) -> int:
    with CaptureQueriesContext(connection) as queries:
        compared(a, b)
    return len(queries)


def test_the_query_count_does_not_grow_with_the_runs(django_assert_max_num_queries):
    small = count(calculator_run("1+1", "2"), calculator_run("1+2", "3"))
    big_a, big_b = long_run(8), long_run(12)
    assert big_b.steps > 10
    assert count(big_a, big_b) == small
    with django_assert_max_num_queries(small):
        compared(big_a, big_b)


def test_the_page_query_count_does_not_grow_with_the_runs(operator_client, operator_user):
    def page(a: Run, b: Run) -> int:
        url = reverse("runs:run-compare") + f"?a={a.pk}&b={b.pk}"
        with CaptureQueriesContext(connection) as queries:
            assert operator_client.get(url).status_code == 200
        return len(queries)

    small = page(*decided_pair(operator_user))
    assert page(long_run(6), long_run(9)) <= small


# --- the page ---------------------------------------------------------------------------------


def url_for(a: Any, b: Any) -> str:
    return reverse("runs:run-compare") + f"?a={a}&b={b}"


def test_the_page_shows_both_runs_and_highlights_what_differs(operator_client):
    assert reverse("runs:run-compare") == "/runs/compare/"
    a = calculator_run("2+2", "the answer is 4")
    b = calculator_run("2*3", "the answer is 6")
    page = operator_client.get(url_for(a.pk, b.pk)).content.decode()
    assert str(a.pk)[-8:] in page and str(b.pk)[-8:] in page
    assert '<tr class="compare-step compare-differs" data-step="1">' in page
    assert '<tr class="compare-step" data-step="input">' in page
    assert "<del>4</del>" in page and "<ins>6</ins>" in page
    assert "{&quot;expression&quot;: &quot;2*3&quot;}" in page
    assert 'class="compare-differs" data-summary="agent"' in page
    assert 'class="" data-summary="steps"' in page


def test_the_page_escapes_hostile_text(operator_client):
    a = drive(run_start(agent=scripted_agent([{"text": f"says {XSS}"}]), messages=XSS))
    b = drive(run_start(agent=scripted_agent([{"text": "plain"}]), messages="hello"))
    page = operator_client.get(url_for(a.pk, b.pk)).content.decode()
    assert XSS not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_the_same_run_twice_is_allowed_and_says_so(operator_client):
    run = calculator_run("2+2", "4")
    response = operator_client.get(url_for(run.pk, run.pk))
    assert response.status_code == 200
    assert "Both sides are the same run" in response.content.decode()


@pytest.mark.parametrize(
    "query, status, says",
    [
        ("", 400, "needs both a and b"),
        ("?a=", 400, "a is missing"),
        ("?a=nope&b=nope", 400, "a is not a run id"),
        ("?a=RUN&b=", 400, "b is missing"),
        ("?a=RUN&b=00000000-0000-0000-0000-000000000000", 404, "No such run"),
    ],
)
def test_bad_ids_are_a_clear_400_or_404(operator_client, query, status, says):
    run = calculator_run("2+2", "4")
    response = operator_client.get(reverse("runs:run-compare") + query.replace("RUN", str(run.pk)))
    assert response.status_code == status
    assert says in response.content.decode()


def test_the_page_needs_login_and_view_run(client):
    run = calculator_run("2+2", "4")
    response = client.get(url_for(run.pk, run.pk))
    assert response.status_code == 302 and "/login/" in response["Location"]
    client.force_login(view_only_user())
    assert client.get(url_for(run.pk, run.pk)).status_code == 200


def test_the_page_is_refused_without_view_run(client, django_user_model):
    run = calculator_run("2+2", "4")
    client.force_login(django_user_model.objects.create_user("nobody", password="pw"))
    assert client.get(url_for(run.pk, run.pk)).status_code == 403


# --- reaching it --------------------------------------------------------------------------------


def test_the_run_page_links_a_retry_and_the_run_it_retried(operator_client):
    failed = drive(run_start(agent=scripted_agent([{"error": "boom"}]), messages="x"))
    retry = run_retry(run=failed)
    page = operator_client.get(reverse("runs:run-detail", args=[retry.pk])).content.decode()
    assert f'href="/runs/compare/?a={failed.pk}&amp;b={retry.pk}"' in page
    assert "compare with the run it retried" in page
    page = operator_client.get(reverse("runs:run-detail", args=[failed.pk])).content.decode()
    assert f'href="/runs/compare/?a={failed.pk}&amp;b={retry.pk}"' in page
    assert "compare with this retry" in page


def test_the_runs_list_has_a_checkbox_per_row_and_the_compare_button(operator_client):
    a, b = calculator_run("2+2", "4"), calculator_run("2+3", "5")
    page = operator_client.get(reverse("runs:run-list")).content.decode()
    for run in (a, b):
        assert f'data-compare-pick value="{run.pk}"' in page
    assert 'data-compare-url="/runs/compare/" disabled' in page
    assert "js/compare_pick.js" in page
