"""`make screenshots`: full-page PNGs of the operator UI for the README, in static/docs/.

Starts `manage.py serve` (the embedded default) on a fresh temporary var dir, migrates,
seeds the demo agents, adds an operator and one agent whose model fails, creates demo
data through the web app as that operator (a waiting approval, an ask_human question, a
finished run, a delegated run, a failed run, an edited and a rejected decision), then
logs in with Chromium and captures the pages, and the dashboard's cost, tokens and latency
section on its own (stats.png; the demo model is priced for it, so the runs cost
something). The server is stopped at the end.

    .venv/bin/python -m tests.browser.screenshots [--out static/docs]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[2]
OPERATOR = ("dana", "screenshots-pw-1")
ADMIN = ("ada", "screenshots-pw-2")
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PAGES = [  # file name, path (or a key of the demo's ids), what must be shown first
    ("dashboard", "/", "h1 .conn"),
    ("runs", "/runs/", "h1 .conn"),
    ("run-detail", "run:waiting", "#conn"),
    ("threads", "/threads/", None),
    ("thread-detail", "thread:waiting", None),
    ("inbox", "/inbox/", "h1 .conn"),
    ("audit", "/audit/", None),
    ("failures", "/failures/", None),
]
ADMIN_PAGES = [  # file name, path under /admin/agents/agent/<approver>/ (query string included)
    ("agent-version-diff", "versions/2/diff/"),
    (
        "agent-rules-preview",
        "permissions/?tool=send_email&arguments="
        + quote('{"to": ["ops@example.com", "press@competitor.example"]}'),
    ),
]


def _environment(var: Path) -> dict[str, str]:
    """The embedded default whatever this shell points at: SQLite in `var`."""
    drop = {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(
        {
            "AWAKEN_VAR_DIR": str(var),
            "AWAKEN_EMBEDDED_WORKER": "true",
            "AWAKEN_SWEEP_SECONDS": "0.5",
            "DEBUG": "true",
            "DJANGO_SETTINGS_MODULE": "awaken_site.settings",
            "PYTHONUNBUFFERED": "1",
            "LOG_LEVEL": "WARNING",
        }
    )
    return env


def _prepare_database() -> None:
    """Migrate, seed the demo, add the operator and a failing agent (in this process)."""
    import django
    from django.core.management import call_command

    django.setup()
    from django.contrib.auth.models import Group, User

    from agents.errors import NothingToPublish
    from agents.models import Agent, Model, ModelProvider
    from agents.services.agents import agent_publish
    from common.audit import Actor

    call_command("migrate", verbosity=0, interactive=False)
    with contextlib.redirect_stdout(io.StringIO()):
        call_command("seed_demo")  # prints the admin password: not wanted in the output
    user = User.objects.create_user(OPERATOR[0], "dana@example.com", OPERATOR[1], first_name="Dana")
    user.groups.add(Group.objects.get(name="operator"))
    # priced like a hosted model, so stats.png's cost chart has bars (runs keep the prices
    # of their creation: set before the demo runs start)
    Model.objects.filter(slug="demo").update(
        input_price_per_million_usd="3", output_price_per_million_usd="15"
    )
    model, _ = Model.objects.update_or_create(
        slug="flaky-demo",
        defaults={
            "provider": ModelProvider.objects.get(slug="scripted"),
            "upstream_model": "",
            "script": [{"error": "upstream returned 503 Service Unavailable"}],
        },
    )
    agent, _ = Agent.objects.update_or_create(
        slug="reporter",
        defaults={
            "name": "Incident reporter (its model is down)",
            "description": "Summarizes incidents; its upstream model fails.",
            "system_prompt": "Summarize incidents.",
            "tools": [],
            "permission": {"default_behavior": "allow", "rules": []},
            "model": model,
        },
    )
    agent.full_clean()
    with contextlib.suppress(NothingToPublish):
        agent_publish(agent=agent, actor=Actor(label="screenshots", source="cli"))
    admin = User.objects.create_superuser(ADMIN[0], "", ADMIN[1])
    # a second version of the note taker, for the version diff: no emails to competitors
    approver = Agent.objects.get(slug="approver")
    approver.system_prompt += " Never email competitors."
    approver.permission = {
        "default_behavior": "allow",
        "rules": [
            {"tool": "write_note", "behavior": "ask"},
            {"tool": 'send_email(to ~ "*@competitor.example")', "behavior": "deny"},
            {"tool": "send_email", "behavior": "ask"},
        ],
    }
    approver.save()
    agent_publish(
        agent=approver, actor=Actor(user=admin, source="admin"), note="deny emails to competitors"
    )


@contextlib.contextmanager
def _server(env: dict[str, str], logs: Path) -> Iterator[str]:
    from tests.processes import Proc, free_port, http_ok, service_command, wait_for, wait_ready

    port = free_port()
    args, ready = service_command("serve", port=port)
    env = {**env, "LOG_LEVEL": "INFO"}  # daphne says it listens at INFO
    proc = Proc("serve", args, env, logs)
    try:
        wait_ready(proc, ready)
        url = f"http://127.0.0.1:{port}"
        wait_for(lambda: http_ok(f"{url}/healthz"), 20, "the server to answer /healthz")
        yield url
    except BaseException:
        print(proc.log()[-4000:], file=sys.stderr)
        raise
    finally:
        proc.stop()


def _wait(predicate: Callable[[], Any], what: str, timeout: float = 30) -> None:
    from tests.processes import wait_for

    wait_for(predicate, timeout, what, interval=0.1)


class Demo:
    """Runs created through the web app, as the operator."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.ids: dict[str, str] = {}

    def _post(self, path: str, form: dict[str, str]) -> Any:
        token = next(c["value"] for c in self.page.context.cookies() if c["name"] == "csrftoken")
        response = self.page.request.post(path, form=form, headers={"X-CSRFToken": token})
        assert response.ok, (path, response.status)
        return response

    def start(self, key: str, agent: str, message: str) -> str:
        response = self._post("/threads/new", {"agent": agent, "message": message})
        run_id = response.url.rstrip("/").rsplit("/", 1)[-1]
        self.ids[key] = run_id
        return run_id

    def ticket(self, key: str) -> Any:
        from runs.models import Ticket

        run_id = self.ids[key]
        _wait(
            lambda: Ticket.objects.filter(run_id=run_id, status="pending").exists(),
            f"a ticket on {key}",
        )
        return Ticket.objects.get(run_id=run_id, status="pending")

    def decided_ticket(self, key: str) -> Any:
        from runs.models import Ticket

        return Ticket.objects.get(run_id=self.ids[key], status="decided")

    def decide(self, key: str, form: dict[str, str]) -> None:
        self._post(f"/tickets/{self.ticket(key).pk}/decide", form)

    def settle(self, expected: dict[str, str]) -> None:
        from runs.models import Run

        def settled() -> bool:
            rows = Run.objects.filter(pk__in=self.ids.values()).values_list("pk", "status")
            status = {str(pk): value for pk, value in rows}
            return all(status.get(self.ids[key]) == value for key, value in expected.items())

        _wait(settled, f"the demo runs to reach {expected}", timeout=60)


def _create_demo_data(demo: Demo) -> None:
    demo.start("finished", "approver", "please write a note about the lunch menu")
    demo.start("math", "assistant", "compute (17 + 25) * 3")
    demo.start("delegated", "manager", "delegate: what time is it in UTC?")
    demo.start("edited", "approver", "please write a note about the standup")
    demo.start("rejected", "approver", "email ceo@example.com about the outage")
    demo.start("failed", "reporter", "summarize yesterday's incidents")
    demo.start("failed-again", "reporter", "summarize last week's incidents")  # one group: 2
    demo.decide("finished", {"action": "approve", "comment": "looks right"})
    demo.decide(
        "edited",
        {
            "action": "edit",
            "arg_title": "Standup: deploy freeze until Friday",
            "arg_body": "please write a note about the standup",
            "comment": "clearer title",
        },
    )
    demo.decide("rejected", {"action": "reject", "comment": "not to the CEO"})
    demo.start("question", "helpdesk", "ask a human which color the launch banner should be")
    demo.start("email", "approver", "email ops@example.com about the deploy at 17:00")
    demo.start("waiting", "approver", "please write a note about the Friday retro")
    for key in ("question", "email", "waiting"):
        demo.ticket(key)
    demo.settle(
        {
            "finished": "done",
            "math": "done",
            "delegated": "done",
            "edited": "done",
            "rejected": "done",
            "failed": "done",
            "failed-again": "done",
            "question": "waiting",
            "email": "waiting",
            "waiting": "waiting",
        }
    )


def _capture(page: Any, demo: Demo, out: Path) -> list[Path]:
    from runs.models import Run

    written = []
    for name, where, live in PAGES:
        if where.startswith("run:"):
            path = f"/runs/{demo.ids[where[4:]]}/"
        elif where.startswith("thread:"):
            path = f"/threads/{Run.objects.get(pk=demo.ids[where[7:]]).thread_id}/"
        else:
            path = where
        page.goto(path)
        if live:
            page.locator(live).filter(has_text="live").wait_for()
        page.wait_for_load_state("networkidle")
        time.sleep(0.3)  # the debounced live refreshes settle
        target = out / f"{name}.png"
        page.screenshot(path=str(target), full_page=True)
        written.append(target)
    return written


def _capture_compare(page: Any, demo: Demo, out: Path) -> list[Path]:
    """Two runs of the note taker side by side: the approved lunch note and the rejected
    email (runs:run-compare)."""
    page.goto(f"/runs/compare/?a={demo.ids['finished']}&b={demo.ids['rejected']}")
    page.locator("#compare-steps").wait_for()
    page.wait_for_load_state("networkidle")
    target = out / "compare.png"
    page.screenshot(path=str(target), full_page=True)
    return [target]


def _capture_fork(page: Any, demo: Demo, out: Path) -> list[Path]:
    """The math run's page with the fork panel open: after step 1, its calculator result
    chosen for editing (runs:run-fork)."""
    page.goto(f"/runs/{demo.ids['math']}/")
    page.locator("#fork-panel summary").click()
    with page.expect_response(lambda r: "/fork/form" in r.url):  # the form re-renders
        page.locator("#fork-form input[name=step][value='1']").check()
    with page.expect_response(lambda r: "/fork/form" in r.url):
        page.locator("#fork-form select[name=edit_seq]").select_option(index=2)
    page.locator("#fork-form textarea[name=edit_text]").wait_for()
    page.wait_for_load_state("networkidle")
    page.locator("#fork-panel").scroll_into_view_if_needed()
    target = out / "fork.png"
    page.screenshot(path=str(target))
    return [target]


def _capture_trace(page: Any, demo: Demo, out: Path) -> list[Path]:
    """The delegating run's trace: the manager's steps with the assistant's child run
    nested under the call that started it (runs:run-trace)."""
    page.goto(f"/runs/{demo.ids['delegated']}/#trace")
    page.locator("#trace-root details.span.k-child").first.wait_for()
    page.wait_for_load_state("networkidle")
    target = out / "trace.png"
    page.locator("#run-trace-panel").screenshot(path=str(target))
    return [target]


def _capture_stats(page: Any, out: Path) -> list[Path]:
    """The dashboard's cost, tokens and latency section (the default window), alone."""
    page.goto("/#glance")
    page.locator("h1 .conn").filter(has_text="live").wait_for()
    section = page.locator("#glance")
    section.locator("svg.glance-durations text.tick").first.wait_for()
    page.wait_for_load_state("networkidle")
    margin = 12  # the page's background around the section, its heading included
    box = section.evaluate(  # in page coordinates, as a full-page clip wants them
        """(e, m) => { const r = e.getBoundingClientRect();
        return {x: Math.max(r.left + scrollX - m, 0), y: Math.max(r.top + scrollY - m, 0),
                width: r.width + 2 * m, height: r.height + 2 * m}; }""",
        margin,
    )
    target = out / "stats.png"
    page.screenshot(path=str(target), full_page=True, clip=box)
    return [target]


def _capture_admin(context: Any, out: Path) -> list[Path]:
    """The configuration pages, as an admin (a second session in the same browser)."""
    from agents.models import Agent
    from tests.browser.helpers import login

    context.clear_cookies()
    page = context.new_page()
    login(page, *ADMIN, admin=True)
    base = f"/admin/agents/agent/{Agent.objects.get(slug='approver').pk}/"
    written = []
    for name, where in ADMIN_PAGES:
        page.goto(base + where)
        page.wait_for_load_state("networkidle")
        target = out / f"{name}.png"
        page.screenshot(path=str(target), full_page=True)
        written.append(target)
    return written


def _capture_replays(context: Any, out: Path) -> list[Path]:
    """A finished replay set's table, as the admin: the note taker's finished runs
    replayed on its draft with every ticket rejected, from the form (runs:replays)."""
    from tests.browser.helpers import login

    context.clear_cookies()
    page = context.new_page()
    login(page, *ADMIN, admin=True)
    page.goto("/replays/")
    form = page.locator("#replay-form")
    form.locator("select[name=agent_id]").select_option("approver")
    form.locator("input[name=version]").fill("draft")
    form.locator("select[name=ticket_policy]").select_option("reject_all")
    page.locator("#replay-preview [data-matched]").wait_for()
    form.locator("button[type=submit]").click()
    page.locator("#replay-progress[data-status=done]").wait_for(timeout=60_000)
    page.wait_for_load_state("networkidle")
    target = out / "replays.png"
    page.screenshot(path=str(target), full_page=True)
    return [target]


def _capture_teamwork(context: Any, demo: Demo, out: Path) -> list[Path]:
    """The pages for teams, as the admin: a ticket the operator is on (claimed through the
    page), a policy's preview in the inbox, and a rule proposed from a decision."""
    from tests.browser.helpers import login

    context.clear_cookies()
    operator = context.new_page()
    login(operator, *OPERATOR)
    operator.goto("/inbox/")
    operator.locator("h1 .conn").filter(has_text="live").wait_for()
    email = demo.ticket("email")
    operator.locator(f"#ticket-row-{email.pk}").get_by_role("button", name="Claim").click()
    operator.locator(f"#ticket-row-{email.pk}").get_by_text("you are on this").wait_for()
    # a keyboard approval's undo window, caught while it counts down (then undone)
    waiting = operator.locator(f"#ticket-row-{demo.ticket('waiting').pk}")
    waiting.focus()
    operator.keyboard.press("a")
    waiting.locator(".undo-note").filter(has_text="Approving in").wait_for()
    written = [out / "inbox-undo.png"]
    operator.screenshot(path=str(written[-1]), full_page=True)
    operator.keyboard.press("u")
    waiting.locator(".undo-note").wait_for(state="hidden")
    # the operator's own subscription: email when a note ticket of the note taker opens
    operator.goto("/notifications/")
    form = operator.locator("form").filter(has=operator.get_by_role("textbox", name="Tool"))
    form.get_by_role("combobox", name="Agent").select_option("approver")
    form.get_by_role("textbox", name="Tool").fill("write_*")
    form.get_by_role("button", name="Subscribe").click()
    operator.get_by_text("write_*").first.wait_for()
    written.append(out / "notifications.png")
    operator.screenshot(path=str(written[-1]), full_page=True)
    operator.close()

    context.clear_cookies()
    page = context.new_page()
    login(page, *ADMIN, admin=True)
    page.goto("/inbox/")
    page.locator("h1 .conn").filter(has_text="live").wait_for()
    page.locator(f"#ticket-row-{email.pk}").get_by_text("on this").wait_for()
    panel = page.locator("#inbox-policy")
    panel.locator("summary").click()
    panel.get_by_label("Agent").select_option("approver")
    panel.get_by_role("button", name="Preview").click()
    page.locator("#inbox-policy-out").get_by_role("heading").wait_for()
    written.append(out / "inbox-teamwork.png")
    page.screenshot(path=str(written[-1]), full_page=True)

    decided = demo.decided_ticket("finished")
    page.goto(f"/tickets/{decided.pk}/rule?behavior=allow")
    page.wait_for_load_state("networkidle")
    written.append(out / "rule-from-decision.png")
    page.screenshot(path=str(written[-1]), full_page=True)
    page.close()
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "static" / "docs")
    options = parser.parse_args(argv)
    out = options.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    if not Path(CHROMIUM).exists():
        print(f"needs Chromium at {CHROMIUM}", file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="awaken-screenshots-") as tmp:
        var = Path(tmp) / "var"
        var.mkdir()
        env = _environment(var)
        for key in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL"):
            os.environ.pop(key, None)
        os.environ.update({k: env[k] for k in ("AWAKEN_VAR_DIR", "DEBUG", "LOG_LEVEL")})
        os.environ["DJANGO_SETTINGS_MODULE"] = "awaken_site.settings"
        _prepare_database()
        # this process polls the ORM while the sync Playwright's loop runs
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
        from playwright.sync_api import sync_playwright

        from tests.browser.helpers import login  # imports models: after django.setup()

        with _server(env, Path(tmp)) as url, sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            context = browser.new_context(
                base_url=url, viewport={"width": 1280, "height": 800}, device_scale_factor=1
            )
            context.set_default_timeout(15_000)
            page = context.new_page()
            login(page, *OPERATOR)
            demo = Demo(page)
            _create_demo_data(demo)
            written = _capture(page, demo, out)
            written += _capture_stats(page, out)
            written += _capture_compare(page, demo, out)
            written += _capture_fork(page, demo, out)
            written += _capture_trace(page, demo, out)
            written += _capture_admin(context, out)
            written += _capture_teamwork(context, demo, out)
            written += _capture_replays(context, out)
            browser.close()
    for path in written:
        print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    print(f"screenshots done in {time.monotonic() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
