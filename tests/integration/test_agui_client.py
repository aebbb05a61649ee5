"""The stock AG-UI client (`@ag-ui/client`'s HttpAgent, npm, tests/agui_client/) drives our
agents over `POST /api/v1/agents/{slug}/ag-ui` against real processes (daphne and a
Celery worker on PostgreSQL and Redis; conftest.py): a run to its answer, a run through
a ticket (the interrupt, then a resume that approves or cancels it), and a refused
token. Every event the client received is validated again by ag-ui-protocol's models.
The client's own checks (event order, the interrupt it must answer) ran inside it."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import Event
from pydantic import TypeAdapter

from runs.models import Run, Ticket
from tests.factories import APPROVAL, call, note_call, scripted_agent, token_for, user_with_role
from tests.processes import free_port

CLIENT_DIR = Path(__file__).resolve().parent.parent / "agui_client"
EVENT = TypeAdapter(Event)


@pytest.fixture(scope="module")
def agui_client() -> Path:
    """The client's script, its npm packages installed (from the lock file) once."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are needed for the stock AG-UI client")
    if not (CLIENT_DIR / "node_modules" / "@ag-ui" / "client").is_dir():
        subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=CLIENT_DIR,
            check=True,
            timeout=300,
        )
    return CLIENT_DIR / "drive.mjs"


@pytest.fixture
def served(processes: Any) -> str:
    port = free_port()
    processes("worker", "worker-a", concurrency=2)
    processes("daphne", port=port)
    return f"http://127.0.0.1:{port}"


def drive(script: Path, url: str, token: str, message: str, decision: str = "") -> Any:
    args = ["node", str(script), url, token, message, *([decision] if decision else [])]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    return done


def outcome(script: Path, *args: str) -> dict[str, Any]:
    done = drive(script, *args)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    for run in result["runs"]:
        for event in run["events"]:
            EVENT.validate_python(event)  # what the client got is the protocol's shapes
    return result


def types(run: dict[str, Any]) -> list[str]:
    return [event["type"] for event in run["events"]]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_the_stock_client_runs_to_the_answer(served: str, agui_client: Path):
    agent = scripted_agent(
        [{"text": "", "tool_calls": [call("calculator", {"expression": "6*7"})]}, {"text": "42"}],
        slug=unique("calc"),
    )
    token = token_for(user_with_role("operator", unique("op")))
    url = f"{served}/api/v1/agents/{agent.slug}/ag-ui"
    result = outcome(agui_client, url, token, "what is 6*7?")
    (run,) = result["runs"]
    assert types(run)[0] == "RUN_STARTED" and types(run)[-1] == "RUN_FINISHED"
    assert "TOOL_CALL_RESULT" in types(run)
    assert run["result"]["response"] == "42"
    roles = [m["role"] for m in result["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant"]
    ours = Run.objects.get(thread_id=result["threadId"])
    assert ours.status == Run.Status.DONE


@pytest.mark.parametrize(
    ("decision", "action"), [('{"action": "approve"}', "approve"), ("cancel", "reject")]
)
def test_the_stock_client_goes_through_a_ticket(
    served: str, agui_client: Path, decision: str, action: str
):
    agent = scripted_agent(
        [{"text": "noting", "tool_calls": [note_call("lunch")]}, {"text": "all done"}],
        permission=APPROVAL,
        slug=unique("noter"),
    )
    token = token_for(user_with_role("operator", unique("op")))
    url = f"{served}/api/v1/agents/{agent.slug}/ag-ui"
    result = outcome(agui_client, url, token, "write it down", decision)
    first, resumed = result["runs"]
    assert first["events"][-1]["outcome"]["type"] == "interrupt"
    (interrupt,) = first["events"][-1]["outcome"]["interrupts"]
    assert interrupt["reason"] == "tool_approval"
    assert types(resumed)[:2] == ["RUN_STARTED", "CUSTOM"]
    assert types(resumed)[-1] == "RUN_FINISHED" and resumed["result"]["response"] == "all done"
    ticket = Ticket.objects.get(ticket_id=interrupt["id"], run__thread_id=result["threadId"])
    assert ticket.decision.action == action
    assert ticket.decision.actor_label.startswith("op-")


def test_the_stock_client_without_a_valid_token_is_refused(served: str, agui_client: Path):
    agent = scripted_agent([{"text": "x"}], slug=unique("plain"))
    url = f"{served}/api/v1/agents/{agent.slug}/ag-ui"
    done = drive(agui_client, url, "awk_not_a_token", "hi")
    assert done.returncode != 0 and "401" in done.stderr
    assert not Run.objects.filter(agent=agent).exists()
