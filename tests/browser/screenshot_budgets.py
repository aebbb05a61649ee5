"""The budgets' screenshots (docs/budgets.md): the dashboard's Budgets panel and a run held
by its team's budget. `python -m tests.browser.screenshot_budgets` (a fresh temporary
server with the demo agents, as `make screenshots`; Debian's Chromium)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from tests.browser.screenshots import (
    ADMIN,
    CHROMIUM,
    CHROMIUM_ARGS,
    ROOT,
    _environment,
    _prepare_database,
    _server,
    _wait,
)


def _budgets() -> str:
    """The default team spends at most 150 tokens a day and $5 a month; its runs pass
    the limit, and the next one waits. Returns the held run's id."""
    from agents.models import Agent
    from common.audit import Actor
    from common.models import Team
    from runs.models import Run
    from runs.operations.services.budget_changes import budget_create
    from runs.services.submission_flow import run_start

    actor = Actor(label="screenshots", source="cli")
    assistant = Agent.objects.get(slug="assistant")
    team = Team.objects.get(pk=assistant.team_id)
    budget_create(actor=actor, team=team, period="day", token_limit=150, warn_percent=75)
    budget_create(actor=actor, team=team, agent=assistant, period="month", cost_limit_usd=5)
    for text in ("what is 6*7?", "what time is it?", "compute 12*12", "what is 2+2?"):
        run = run_start(agent=assistant, messages=text)
        _wait(lambda run=run: Run.objects.get(pk=run.pk).status == "done", "a run")
    held = run_start(agent=assistant, messages="what is 9*9?")
    _wait(
        lambda: (
            Run.objects.filter(pk=held.pk, status_reason="budget").exists()
            or Run.objects.filter(pk=held.pk, status="done").exists()
        ),
        "the last run to wait for the budget",
        timeout=60,
    )
    return str(held.pk)


def main() -> int:
    out = ROOT / "static" / "docs"
    sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)
    with tempfile.TemporaryDirectory(prefix="awaken-screenshots-") as tmp:
        var = Path(tmp) / "var"
        var.mkdir()
        env = _environment(var)
        for key in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL"):
            os.environ.pop(key, None)
        os.environ.update({k: env[k] for k in ("AWAKEN_VAR_DIR", "DEBUG", "LOG_LEVEL")})
        os.environ["DJANGO_SETTINGS_MODULE"] = "awaken_site.settings"
        _prepare_database()
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
        from playwright.sync_api import sync_playwright

        from tests.browser.helpers import login

        with _server(env, Path(tmp)) as url, sync_playwright() as playwright:
            held = _budgets()
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            context = browser.new_context(base_url=url, viewport={"width": 1280, "height": 800})
            page = context.new_page()
            login(page, *ADMIN)
            page.goto("/")
            page.locator("#budgets").screenshot(path=str(out / "budgets.png"))
            page.goto(f"/runs/{held}/")
            page.screenshot(path=str(out / "budget-held-run.png"))
            browser.close()
    print("wrote static/docs/budgets.png, static/docs/budget-held-run.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
