"""What a process loads at start-up: the MCP SDK and ag-ui-protocol (with pydantic) cost
every process ~35 MB and ~0.7 s, and most processes never talk to an MCP server or an
AG-UI client; they are loaded on first use (agents/services/mcp.py, runs/api/views/agui.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = """
import os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "awaken_site.settings")
import django
django.setup()
from django.urls import get_resolver
get_resolver().url_patterns  # every view module, as a serving process has them
import awaken_site.celery
from celery import current_app
current_app.loader.import_default_modules()  # every task module, as a worker has them
print(" ".join(sorted(m for m in ("mcp", "ag_ui", "pydantic") if m in sys.modules)))
"""


def test_start_up_loads_neither_the_mcp_sdk_nor_ag_ui(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "REDIS_URL"))}
    env["AWAKEN_VAR_DIR"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.strip() == "", done.stdout
