"""The heavy SDKs load only when used, and `celery beat` does not load the application.

Each check runs in a fresh interpreter: the test process itself has imported everything.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SDKS = ("openai", "a2a")

# What every process of the deployment imports: Django set up (admin autodiscovery
# included), the URL conf with every included one, the ASGI application and the tasks.
EVERY_PROCESS = r"""
import json, os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "awaken_site.settings")
import django
django.setup()
import awaken_site.urls
from django.urls import get_resolver
get_resolver().url_patterns
import awaken_site.asgi
import runs.tasks
print(json.dumps(sorted(sys.modules)))
"""

# `celery -A awaken_site beat`, reporting at exit what it had imported (beat sends what is
# printed to its log: the report is the end of a log line).
BEAT = r"""
import atexit, json, sys
atexit.register(lambda: print("MODULES " + json.dumps(sorted(sys.modules)), flush=True))
from celery.__main__ import main
sys.argv = ["celery", "-A", "awaken_site", "beat", "--loglevel", "INFO", "-s", sys.argv[1]]
main()
"""


def _environment() -> dict[str, str]:
    """The embedded default (SQLite, in-memory broker): nothing outside the process."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL")
    }
    env["DJANGO_SETTINGS_MODULE"] = "awaken_site.settings"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _sdk_modules(modules: list[str]) -> list[str]:
    return [name for name in modules if name.split(".")[0] in SDKS]


def test_setup_urls_asgi_and_tasks_import_neither_openai_nor_a2a() -> None:
    done = subprocess.run(
        [sys.executable, "-c", EVERY_PROCESS],
        cwd=ROOT,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    modules = json.loads(done.stdout.strip().splitlines()[-1])
    assert "runs.tasks" in modules and "agents.admin" in modules  # the app really loaded
    assert _sdk_modules(modules) == []


def test_beat_sends_the_sweep_without_setting_django_up(tmp_path: Path) -> None:
    env = _environment()
    env["AWAKEN_SWEEP_SECONDS"] = "0.2"
    beat = subprocess.Popen(
        [sys.executable, "-c", BEAT, str(tmp_path / "schedule")],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []

    def read() -> None:
        for line in beat.stdout or ():
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and beat.poll() is None:
            if any("Sending due task runs-sweep (runs.sweep)" in line for line in list(lines)):
                break
            time.sleep(0.1)
        assert any("runs-sweep (runs.sweep)" in line for line in list(lines)), "".join(lines)
        beat.send_signal(signal.SIGTERM)
        beat.wait(timeout=30)
        reader.join(timeout=10)
    finally:
        if beat.poll() is None:
            os.killpg(beat.pid, signal.SIGKILL)
            beat.wait()
    reports = [line.partition("MODULES ")[2] for line in lines if "MODULES " in line]
    assert reports, "".join(lines)[-3000:]
    modules = json.loads(reports[-1])
    assert "django.conf" in modules  # the schedule and broker come from the settings
    loaded = [
        name
        for name in modules
        if name.split(".")[0] in ("runs", "agents", *SDKS) or name == "django.db.models"
    ]
    assert loaded == []
