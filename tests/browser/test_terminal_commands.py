"""What the terminal commands do reaches the pages open in a browser.

`manage.py run_agent` and `manage.py decide` commit in a process of their own. On the
embedded default (SQLite, in-memory channel layer) their broadcasts reach no page, so the
serving process picks their commits up from the database; in the distributed mode they
go through Redis. Either way an open page shows them within a second or so, without a
reload, and nobody is offered a ticket that was already decided.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from django.core.management import call_command
from django.db import connection
from playwright.sync_api import expect

from runs.models import Run, Ticket
from tests.browser.conftest import distributed
from tests.browser.helpers import login, mark_page, still_same_page
from tests.factories import user_with_role
from tests.processes import ROOT, database_url

# The server must show a commit of another process within a second; the rest is margin
# for a busy two-core machine (the browser, the server and the command share it).
SHOWN_WITHIN_MS = 2500
RUN_LINE = re.compile(r"^run (?P<id>[0-9a-f-]{36}) on thread", re.MULTILINE)
TICKET_LINE = re.compile(r"decide with: python manage.py decide (?P<id>\S+) approve")


def terminal(tmp_path: Path, *args: str) -> str:
    """`manage.py …` in its own process on the server's database, as an operator runs it."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env.update(
        {
            "DATABASE_URL": database_url(connection.settings_dict),
            "DJANGO_SETTINGS_MODULE": "awaken_site.settings",
            "AWAKEN_VAR_DIR": str(tmp_path),
        }
    )
    if distributed():  # the Celery worker the fixture started runs the run
        env["AWAKEN_EMBEDDED_WORKER"] = "false"
    else:  # the command runs it in its own process, as on the embedded default
        for name in ("REDIS_URL", "CELERY_BROKER_URL"):
            env.pop(name, None)
        env["AWAKEN_EMBEDDED_WORKER"] = "true"
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


def test_runs_started_and_tickets_decided_in_a_terminal_reach_the_open_pages(new_page, tmp_path):
    call_command("seed_demo", verbosity=0)
    user_with_role("operator", "opa")
    runs_list = new_page()
    login(runs_list, "opa")
    runs_list.goto("/runs/")
    mark_page(runs_list)
    expect(runs_list.locator(".conn")).to_have_text("live")

    # a run started in a terminal appears in the open list
    started = terminal(
        tmp_path, "run_agent", "approver", "please write a note about lunch", "--timeout", "60"
    )
    found_run, found_ticket = RUN_LINE.search(started), TICKET_LINE.search(started)
    assert found_run and found_ticket, started
    run_id, ticket_id = found_run["id"], found_ticket["id"]
    row = runs_list.locator(f"#run-row-{run_id}")
    expect(row.locator(".badge[title^=waiting]")).to_have_text(
        "Waiting for a decision", timeout=SHOWN_WITHIN_MS
    )

    run_page = runs_list.context.new_page()
    run_page.goto(f"/runs/{run_id}/")
    mark_page(run_page)
    expect(run_page.locator("#conn")).to_have_text("live")
    expect(run_page.get_by_role("button", name="Approve")).to_be_visible()

    # the ticket decided in a terminal leaves the open run page, which follows the run
    decided = terminal(tmp_path, "decide", ticket_id, "approve", "--timeout", "60")
    assert "done (natural)" in decided, decided
    finished_at = time.monotonic()
    expect(run_page.locator("#run-status .badge")).to_have_attribute(
        "title", "done · natural", timeout=SHOWN_WITHIN_MS
    )
    expect(run_page.locator("#run-tickets")).to_contain_text(
        "No open tickets.", timeout=SHOWN_WITHIN_MS
    )
    expect(run_page.get_by_role("button", name="Approve")).to_have_count(0)
    shown_after = time.monotonic() - finished_at
    run = Run.objects.get(pk=run_id)
    expect(run_page.locator("#run-timeline .ev")).to_have_count(run.last_event_seq)
    expect(run_page.locator("#run-timeline b[title=ticket_decided]")).to_have_text("Ticket decided")
    expect(row.locator(".badge[title='done · natural']")).to_have_text(
        "Finished", timeout=SHOWN_WITHIN_MS
    )
    assert Ticket.objects.get(pk=ticket_id).status == Ticket.Status.DECIDED
    assert still_same_page(run_page) and still_same_page(runs_list)
    assert shown_after < SHOWN_WITHIN_MS / 1000, shown_after
