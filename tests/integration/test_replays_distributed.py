"""Replays on real processes (PostgreSQL, Redis; conftest.py): 20 past runs replayed two
at a time through daphne's API by a worker that also serves live runs. The live runs keep
their usual time (replays are priority 255) and never more than two replays run at once."""

from __future__ import annotations

import httpx
from django.db.models import Max

from runs.models import Run
from runs.replays.models.replays import ReplaySet
from runs.services.submission_flow import run_start
from tests.factories import bearer, call, scripted_agent, token_for, user_with_role
from tests.processes import free_port, wait_for

STEP = 0.3  # seconds each scripted turn takes


def slow_agent(slug: str) -> object:
    script = [
        {"text": "", "delay": STEP, "tool_calls": [call("calculator", {"expression": "6*7"})]},
        {"text": "42", "delay": STEP},
    ]
    return scripted_agent(script, slug=slug)


def live_duration(agent: object, text: str, watch: list[int]) -> float:
    """Start a live run, wait for it to end (sampling the running replays meanwhile);
    its time from submission to its end, as the database recorded them."""
    run = run_start(agent=agent, messages=text)

    def finished() -> bool:
        watch.append(running_replays())
        return Run.objects.filter(pk=run.pk, status=Run.Status.DONE).exists()

    wait_for(finished, 30, f"live run {text}")
    run.refresh_from_db()
    assert run.status_reason == "natural"
    return (run.finished_at - run.created_at).total_seconds()


def running_replays() -> int:
    return Run.objects.filter(run_mode="replay").exclude(status=Run.Status.DONE).count()


def test_twenty_replays_two_at_a_time_beside_live_runs(processes):
    port = free_port()
    processes("daphne", port=port)
    processes("worker", concurrency=4)
    past = slow_agent("replayed")
    originals = [run_start(agent=past, messages=f"sum {index}") for index in range(20)]
    wait_for(
        lambda: Run.objects.filter(agent=past, status=Run.Status.DONE).count() == 20,
        60,
        "the 20 original runs",
    )
    live = slow_agent("live")
    watch: list[int] = []
    alone = live_duration(live, "alone", watch)

    admin = user_with_role("admin", "ada")
    raw = token_for(admin, "replays")
    body = {"agent_id": past.slug, "limit": 20, "concurrency": 2, "ticket_policy": "reject_all"}
    response = httpx.post(
        f"http://127.0.0.1:{port}/api/v1/replays",
        json=body,
        headers={"Authorization": f"Bearer {raw}"},
        timeout=30,
    )
    assert response.status_code == 201, response.text
    set_id = response.json()["id"]
    assert response.json()["progress"]["total"] == 20

    during = []
    for index in range(3):
        wait_for(lambda: running_replays() > 0 or _done(set_id), 10, "replays running")
        during.append(live_duration(live, f"during {index}", watch))
    wait_for(lambda: watch.append(running_replays()) or _done(set_id), 120, "the replay set")

    assert max(watch) <= 2, watch
    for seconds in during:
        assert seconds <= 2 * alone + 2, (alone, during)
    replays = Run.objects.filter(run_mode="replay")
    assert replays.count() == 20
    assert set(replays.values_list("priority", flat=True)) == {255}
    assert set(replays.values_list("status_reason", flat=True)) == {"natural"}
    assert replays.aggregate(Max("agent_version"))["agent_version__max"] == (
        originals[0].agent_version_id
    )
    detail = bearer(raw).get(f"/api/v1/replays/{set_id}")  # in process, the same database
    assert detail.status_code == 200
    assert [item["changed"] for item in detail.json()["items"]] == [False] * 20


def _done(set_id: str) -> bool:
    return ReplaySet.objects.filter(pk=set_id, status=ReplaySet.Status.DONE).exists()
