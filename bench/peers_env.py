"""The peers' environment (.venv-peers, pinned in bench/peers/requirements.txt, never in the
project's dependencies): found, or installed when missing and allowed; the clean
environment the peers run in (none of the project's settings, nothing that calls out);
their package versions."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from bench.common import BenchError
from bench.peers_settings import (
    INSTALL_TIMEOUT,
    PEERS_DIR,
    PEERS_ENABLED,
    PEERS_INSTALL,
    PEERS_VENV,
)


def peers_python() -> tuple[Path | None, str]:
    """The peers' interpreter, installing their environment when it is missing and that is
    allowed; (None, reason) when it cannot be had."""
    if not PEERS_ENABLED:
        return None, "disabled by BENCH_PEERS=0"
    python = PEERS_VENV / "bin" / "python"
    probe = [
        str(python),
        "-c",
        "import dbos, httpx, langchain_openai, langgraph, langgraph_api, langgraph_cli",
    ]
    if python.exists() and subprocess.run(probe, capture_output=True, timeout=120).returncode == 0:
        return python, ""
    if not PEERS_INSTALL:
        return None, f"{PEERS_VENV.name} is missing or incomplete (run `make bench-peers`)"
    print(f"  installing the peers into {PEERS_VENV.name} (make bench-peers) ...", flush=True)
    try:
        install_peers()
    except (OSError, subprocess.SubprocessError, BenchError) as exc:
        return None, f"could not install {PEERS_VENV.name}: {str(exc)[-400:]}"
    if subprocess.run(probe, capture_output=True, timeout=120).returncode != 0:
        return None, f"{PEERS_VENV.name} installed but its packages do not import"
    return python, ""


def install_peers() -> None:
    """python3 -m venv .venv-peers && pip install -r bench/peers/requirements.txt"""
    base = shutil.which("python3") or sys.executable
    if not (PEERS_VENV / "bin" / "python").exists():
        subprocess.run([base, "-m", "venv", str(PEERS_VENV)], check=True, timeout=300)
    pip = [str(PEERS_VENV / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    done = subprocess.run(
        [*pip, "--disable-pip-version-check", "-r", str(PEERS_DIR / "requirements.txt")],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT,
    )
    if done.returncode != 0:
        raise BenchError(done.stderr or done.stdout or f"pip exited {done.returncode}")


def peers_env() -> dict[str, str]:
    """A clean environment for the peers: none of the project's settings, and nothing that
    would make them call out (tracing, analytics)."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(
        LANGSMITH_TRACING="false",
        LANGSMITH_TRACING_V2="false",
        LANGCHAIN_TRACING_V2="false",
        LANGCHAIN_TRACING="false",
        LANGGRAPH_CLI_NO_ANALYTICS="1",
        DO_NOT_TRACK="1",
        LOG_LEVEL="WARNING",  # as the Awaken processes run
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    return env


def print_peer_versions(python: Path) -> None:
    """The versions of the peers' packages, as their pip lists them."""
    versions = subprocess.run(
        [str(python), "-m", "pip", "list", "--format", "json", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    wanted = ("langgraph", "langgraph-api", "langgraph-cli", "langgraph-runtime-inmem", "dbos")
    try:
        installed = {p["name"].lower(): p["version"] for p in json.loads(versions.stdout)}
    except ValueError:
        installed = {}
    print("  peers: " + ", ".join(f"{n} {installed.get(n, '?')}" for n in wanted), flush=True)
