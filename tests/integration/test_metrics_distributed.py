"""Prometheus metrics in the distributed mode: two `celery worker` processes (one with
the product's threads pool, one prefork with two children) and `daphne` write to one multiprocess directory; a scrape of
/metrics over HTTP, with its token, sums them (PostgreSQL, Redis; conftest.py)."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from prometheus_client.mmap_dict import MmapedDict

from runs.models import Run, Ticket
from runs.services.submission_flow import run_start
from tests.factories import APPROVAL, call, note_call, scripted_agent, token_for, user_with_role
from tests.processes import free_port, wait_for

TOKEN = "metrics-" + uuid.uuid4().hex
RUNS = 8


def http(url: str, *, token: str | None = None, body: dict | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, data=json.dumps(body).encode() if body else None)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    if body is not None:
        request.add_header("Content-Type", "application/json")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def sample(text: str, name: str, **labels: str) -> float:
    """One sample's value in a Prometheus text scrape (0 when absent)."""
    shown = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
    pattern = re.escape(f"{name}{{{shown}}}" if labels else name) + r" (\S+)\n"
    found = re.search(pattern, text)
    return float(found.group(1)) if found else 0.0


def parent_of(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^PPid:\s+(\d+)", status, re.M).group(1))


def finished_by_process(directory: Path, agent: str) -> dict[int, float]:
    """awaken_runs_finished_total of `agent`, per process that wrote it (file per pid)."""
    totals: dict[int, float] = {}
    for path in directory.glob("counter_*.db"):
        pid = int(path.stem.rsplit("_", 1)[-1])
        for key, value, *_ in MmapedDict.read_all_values_from_file(str(path)):
            _name, sample_name, labels, _help = json.loads(key)
            if sample_name == "awaken_runs_finished_total" and labels.get("agent") == agent:
                totals[pid] = totals.get(pid, 0.0) + value
    return totals


def test_metrics_sum_both_workers_and_move_as_runs_finish_and_tickets_are_decided(
    processes, service_env, tmp_path
):
    directory = tmp_path / "prometheus"
    service_env.update(PROMETHEUS_MULTIPROC_DIR=str(directory), AWAKEN_METRICS_TOKEN=TOKEN)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    workers = {
        processes("worker", "worker-a", concurrency=2, pool="prefork").pid,
        processes("worker", "worker-b", concurrency=2).pid,
    }
    processes("daphne", port=port)

    assert http(f"{base}/metrics")[0] == 401
    assert http(f"{base}/metrics", token="wrong")[0] == 401

    agent = scripted_agent(
        [{"text": "", "tool_calls": [call("sleep", {"seconds": 0.4})]}, {"text": "rested"}],
        tools=["sleep"],
        slug=f"sleepy-{uuid.uuid4().hex[:8]}",
    )
    runs = [run_start(agent=agent, messages=f"rest {i}") for i in range(RUNS)]
    asking = scripted_agent(
        [{"text": "noting", "tool_calls": [note_call("lunch")]}, {"text": "all done"}],
        permission=APPROVAL,
        slug=f"asking-{uuid.uuid4().hex[:8]}",
    )
    waiting = run_start(agent=asking, messages="write it down")
    done = Run.objects.filter(pk__in=[run.pk for run in runs], status="done")
    wait_for(lambda: done.count() == RUNS, 90, "the runs to finish")
    wait_for(lambda: Run.objects.filter(pk=waiting.pk, status="waiting").exists(), 30, "the ticket")

    status, text = http(f"{base}/metrics", token=TOKEN)
    assert status == 200, text[:500]
    finished = sample(text, "awaken_runs_finished_total", agent=agent.slug, outcome="completed")
    assert finished == RUNS == done.count()
    assert sample(text, "awaken_runs_started_total", agent=agent.slug) == RUNS
    assert sample(text, "awaken_tool_calls_total", tool="sleep", outcome="succeeded") == RUNS
    assert sample(text, "awaken_tool_call_duration_seconds_count", tool="sleep") == RUNS
    assert sample(text, "awaken_tool_call_duration_seconds_sum", tool="sleep") >= 0.4 * RUNS
    assert sample(text, "awaken_step_duration_seconds_count", agent=agent.slug) == 2 * RUNS
    assert (
        sample(text, "awaken_run_duration_seconds_count", agent=agent.slug, outcome="completed")
        == RUNS
    )
    model = agent.model.slug
    assert sample(text, "awaken_inference_duration_seconds_count", model=model) == 2 * RUNS
    assert sample(text, "awaken_inference_tokens_total", model=model, kind="output") > 0
    assert sample(text, "awaken_tickets_open", agent=asking.slug, tool="write_note") == 1
    wait = {"agent": asking.slug, "tool": "write_note", "action": "approve"}
    assert sample(text, "awaken_ticket_wait_seconds_count", **wait) == 0

    # the sum holds the runs of both workers, each process in its own file (a worker's
    # own with the threads pool, its children's with prefork)
    per_process = finished_by_process(directory, agent.slug)
    assert sum(per_process.values()) == RUNS
    assert {pid if pid in workers else parent_of(pid) for pid in per_process} == workers, (
        per_process
    )

    # a decision through daphne's API; the run resumes on a worker and finishes
    ticket = Ticket.objects.get(run=waiting, status=Ticket.Status.PENDING)
    api_token = token_for(user_with_role("operator", "metrics-operator"))
    decided = http(
        f"{base}/api/v1/tickets/{ticket.pk}/decision", token=api_token, body={"action": "approve"}
    )
    assert decided[0] in (200, 201), decided
    wait_for(
        lambda: Run.objects.filter(pk=waiting.pk, status="done").exists(), 30, "the resumed run"
    )

    def scraped() -> str:
        return http(f"{base}/metrics", token=TOKEN)[1]

    wait_for(
        lambda: (
            sample(scraped(), "awaken_runs_finished_total", agent=asking.slug, outcome="completed")
            == 1
        ),
        10,
        "the resumed run in the metrics",
    )
    text = scraped()
    assert sample(text, "awaken_ticket_wait_seconds_count", **wait) == 1
    assert sample(text, "awaken_runs_started_total", agent=asking.slug) == 1
    # the database gauges are cached for a few seconds per process
    wait_for(
        lambda: sample(scraped(), "awaken_tickets_open", agent=asking.slug, tool="write_note") == 0,
        15,
        "the open ticket gauge to drop",
    )
