"""The terminal commands as an operator uses them: separate `manage.py` processes on the
embedded default (their own SQLite database, in-process worker)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

# each test runs migrate, seed_demo and the commands in child processes: ~10 s a test
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DECIDE = re.compile(r"decide with: python manage.py decide (\S+) approve")


@pytest.fixture
def manage(tmp_path):
    env = {**os.environ, "AWAKEN_VAR_DIR": str(tmp_path)}
    for name in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "AWAKEN_EMBEDDED_WORKER"):
        env.pop(name, None)

    def run(*args: str) -> str:
        result = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    run("migrate", "--noinput", "-v", "0")
    run("seed_demo")
    return run


def test_run_agent_stops_on_a_ticket_and_decide_finishes_the_run(manage):
    started = manage("run_agent", "approver", "please write a note about lunch", "--timeout", "60")
    assert "tool_call_ready    write_note(" in started
    assert "waiting (suspended)" in started
    ticket = DECIDE.search(started)
    assert ticket, started

    decided = manage("decide", ticket[1], "approve", "--comment", "fine", "--timeout", "60")
    assert "approve recorded for ticket" in decided
    assert "done (natural)" in decided
    assert "answer: Done." in decided


def test_a_delegating_run_lists_the_childs_ticket_and_decide_follows_the_parent(manage):
    started = manage(
        "run_agent", "coordinator", "delegate: please write a note about lunch", "--timeout", "60"
    )
    child = re.search(r"waiting for child run (\S+) \(approver, waiting\)", started)
    assert child, started
    # only the child's ticket is offered: the parent's wait is answered by the child
    assert started.count("decide with:") == 1
    ticket = DECIDE.search(started)
    assert ticket and "write_note" in started.split("waiting for child run")[1]

    decided = manage("decide", ticket[1], "approve", "--timeout", "60")
    assert "parent run" in decided and f"answer of child run {child[1]}" in decided
    parent_part = decided.split("resumes with the answer")[1]
    assert "done (natural)" in parent_part
    answers = re.findall(r"answer: (.+)", decided)
    assert len(answers) == 2 and answers[0] in answers[1]  # the parent reports the child
