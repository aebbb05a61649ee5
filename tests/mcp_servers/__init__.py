"""MCP servers the tests run as real processes (toolbox.py, built with the `mcp` SDK)."""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TOOLBOX = str(Path(__file__).with_name("toolbox.py"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stdio_argv() -> list[str]:
    return [sys.executable, TOOLBOX, "stdio"]


class ToolboxServer:
    """toolbox.py over streamable HTTP on a local port; `restart` keeps the port."""

    def __init__(self, variant: str = "v1") -> None:
        self.port = free_port()
        self.variant = variant
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self, variant: str | None = None) -> ToolboxServer:
        self.variant = variant or self.variant
        env = {**os.environ, "TOOLBOX_VARIANT": self.variant}
        self.process = subprocess.Popen(
            [sys.executable, TOOLBOX, "http", str(self.port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the toolbox MCP server did not start")

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None

    def restart(self, variant: str | None = None) -> None:
        self.stop()
        self.start(variant)


EVERYTHING = "@modelcontextprotocol/server-everything@2026.8.31"


def everything_script() -> str | None:
    """The entry script of `@modelcontextprotocol/server-everything` (npm), installed once
    into a cache directory beside the temporary files; None when node or npm is missing or
    the install fails (no registry): the tests that need it are skipped."""
    if not shutil.which("node") or not shutil.which("npm"):
        return None
    root = Path(tempfile.gettempdir()) / "awaken-tests-mcp-everything"
    root.mkdir(exist_ok=True)
    script = root / "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one install for every test process
        if not script.exists():
            subprocess.run(
                ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(root), EVERYTHING],
                capture_output=True,
                timeout=300,
                check=False,
            )
    return str(script) if script.exists() else None


class EverythingServer:
    """server-everything over streamable HTTP (`PORT`, endpoint /mcp)."""

    def __init__(self, script: str) -> None:
        self.script = script
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> EverythingServer:
        self.process = subprocess.Popen(
            ["node", self.script, "streamableHttp"],
            env={**os.environ, "PORT": str(self.port)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("server-everything did not start")

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None
