"""Browser tests: Chromium (Debian's, driven by Playwright) against a real server on the
test database.

- SQLite (the embedded default): one `manage.py serve` subprocess — daphne plus the
  in-process Celery worker and sweep on the in-memory broker.
- PostgreSQL with REDIS_URL (CI's distributed pass): a `daphne` and a `celery worker`
  (prefork) subprocess, as in tests/integration.

Skipped when /usr/bin/chromium (or playwright) is missing, unless AWAKEN_REQUIRE_BROWSER=1,
which makes them fail instead. A Content-Security-Policy violation on any page a test
opened through `new_page` fails that test.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from tests.processes import (
    Proc,
    database_url,
    free_port,
    http_ok,
    service_command,
    wait_for,
    wait_ready,
)

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
HERE = Path(__file__).resolve().parent
TIMEOUT_MS = 10_000  # any single wait in a page (locators, navigation, expect)


def _missing_browser() -> str | None:
    if not Path(CHROMIUM).exists():
        return f"browser tests need Chromium at {CHROMIUM}"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "browser tests need playwright (pip install -e '.[dev]')"
    return None


def _required() -> bool:
    return os.environ.get("AWAKEN_REQUIRE_BROWSER") == "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests here that use the browser (directly or through `new_page`) are `browser`
    tests; the others (the CSP header checks) run with Django's test client only."""
    reason = _missing_browser()
    for item in items:
        if not Path(str(item.fspath)).resolve().is_relative_to(HERE):
            continue
        if "browser" not in getattr(item, "fixturenames", ()):
            continue
        item.add_marker(pytest.mark.browser)
        if reason is not None and not _required():
            item.add_marker(pytest.mark.skip(reason=reason))


def distributed() -> bool:
    """CI's distributed pass: PostgreSQL and Redis, separate daphne and worker processes."""
    return bool(settings.REDIS_URL) and connection.vendor == "postgresql"


# --- the browser ---------------------------------------------------------------------------


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    """One Chromium for the browser tests.

    Package-scoped rather than session-scoped: while the sync Playwright is started its
    event loop counts as running in this thread, so Django refuses ORM calls
    (SynchronousOnlyOperation). DJANGO_ALLOW_ASYNC_UNSAFE is set for exactly as long as
    Playwright runs, and both end with this package, before the rest of the suite runs.
    """
    reason = _missing_browser()
    if reason is not None:
        pytest.fail(f"{reason} (AWAKEN_REQUIRE_BROWSER=1)")
    from playwright.sync_api import expect, sync_playwright

    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    playwright = sync_playwright().start()
    try:
        expect.set_options(timeout=TIMEOUT_MS)
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()
    finally:
        playwright.stop()
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


# Reports every Content-Security-Policy violation of a document to the test (the binding
# is Playwright's, added to each page by the test: nothing the site ships).
CSP_VIOLATIONS = """document.addEventListener("securitypolicyviolation", (event) => {
  window.__reportCspViolation(
    event.effectiveDirective + " blocked " + (event.blockedURI || "(inline)") + " on " +
    location.pathname + " (" + (event.sourceFile || "the document") + ":" + event.lineNumber + ")"
  );
});"""


def _watch_csp(context: Any, violations: list[str]) -> None:
    """Record the CSP violations of every page of `context` in `violations`: the DOM's
    securitypolicyviolation events and the console's "Refused to ..." messages."""
    context.expose_binding(
        "__reportCspViolation", lambda _source, text: violations.append(str(text))
    )
    context.add_init_script(CSP_VIOLATIONS)

    def on_console(message: Any) -> None:
        if "Content Security Policy" in message.text:
            violations.append(f"console: {message.text}")

    context.on("console", on_console)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """A browser test fails when any page it opened reported a CSP violation."""
    result = yield
    pages = getattr(item, "csp_pages", [])
    for page in pages:  # deliver the reports still on their way from the browser
        with contextlib.suppress(Exception):
            page.evaluate("0")
    violations = getattr(item, "csp_violations", [])
    if violations:
        pytest.fail("Content-Security-Policy violations:\n" + "\n".join(violations))
    return result


@pytest.fixture
def new_page(
    request: pytest.FixtureRequest, browser: Any, live_server_url: str
) -> Iterator[Callable[..., Any]]:
    """Open a page in a fresh browser context (its own cookies: one context per person).
    Every dialog is recorded in `page.dialogs` and dismissed; a Content-Security-Policy
    violation on any of its pages fails the test."""
    contexts: list[Any] = []
    violations: list[str] = []
    pages: list[Any] = []
    request.node.csp_violations = violations
    request.node.csp_pages = pages

    def open_page() -> Any:
        context = browser.new_context(
            base_url=live_server_url, viewport={"width": 1280, "height": 900}
        )
        context.set_default_timeout(TIMEOUT_MS)
        context.set_default_navigation_timeout(TIMEOUT_MS)
        contexts.append(context)
        _watch_csp(context, violations)
        page = context.new_page()
        pages.append(page)
        page.dialogs = []

        def on_dialog(dialog: Any) -> None:
            page.dialogs.append(f"{dialog.type}: {dialog.message}")
            with contextlib.suppress(Exception):
                dialog.dismiss()

        page.on("dialog", on_dialog)
        return page

    yield open_page
    for context in contexts:
        with contextlib.suppress(Exception):
            context.close()


# --- the server ----------------------------------------------------------------------------


def _child_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env.update(
        {
            "DATABASE_URL": database_url(connection.settings_dict),
            "DB_POOL": "true",  # as in production (the test process itself runs without)
            "DJANGO_SETTINGS_MODULE": "awaken_site.settings",
            "AWAKEN_SWEEP_SECONDS": "0.5",
            "PYTHONUNBUFFERED": "1",
            "LOG_LEVEL": "INFO",
            "CELERY_LOG_LEVEL": "INFO",
        }
    )
    env.update(extra)
    return env


@pytest.fixture
def live_server_url(transactional_db: None, tmp_path: Path) -> Iterator[str]:
    """A real server on the test database; its processes stop before the database is
    flushed. Their logs are printed at teardown (pytest shows them when a test fails)."""
    port = free_port()
    logs = tmp_path / "logs"
    logs.mkdir()
    procs: list[Proc] = []
    try:
        if distributed():
            env = _child_env(
                {
                    "REDIS_URL": settings.REDIS_URL,
                    "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
                    "AWAKEN_EMBEDDED_WORKER": "false",
                }
            )
            pending = []
            for kind, name in (("worker", "worker"), ("daphne", "daphne")):
                args, ready = service_command(kind, name=name, port=port, concurrency=2)
                procs.append(Proc(name, args, env, logs))
                pending.append((procs[-1], ready))
            for proc, ready in pending:  # started together, awaited in turn
                wait_ready(proc, ready)
        else:
            var = tmp_path / "var"
            var.mkdir()
            env = _child_env({"AWAKEN_VAR_DIR": str(var), "AWAKEN_EMBEDDED_WORKER": "true"})
            for name in ("REDIS_URL", "CELERY_BROKER_URL"):
                env.pop(name, None)
            args, ready = service_command("serve", port=port)
            procs.append(Proc("serve", args, env, logs))
            wait_ready(procs[-1], ready)
        url = f"http://127.0.0.1:{port}"
        wait_for(lambda: http_ok(f"{url}/healthz"), 20, "the server to answer /healthz")
        yield url
    finally:
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=max(len(procs), 1)) as pool:
            list(pool.map(lambda proc: proc.stop(), procs))  # warm shutdowns, side by side
        for proc in procs:
            print(f"----- {proc.name} log (stopped in {time.monotonic() - started:.1f}s) -----")
            print(proc.log()[-6000:])
