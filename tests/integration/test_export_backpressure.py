"""Exports honour back-pressure under a real daphne (docs/exports.md): a client that reads
a few kilobytes of a large audit export and then stops reading leaves daphne's memory
where it was, instead of daphne reading the whole export into its send buffer, and is
cut off after AWAKEN_STREAM_STALL_SECONDS; the same export read to the end by a client
is complete."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User

from common.models import AuditEntry
from tests.factories import token_for
from tests.processes import free_port, wait_for

ENTRIES = 60_000
PAD = "x" * 1000  # about 1 KB of JSON per entry: a ~67 MB export
READ_BEFORE_STALL = 16 * 1024
STALL_SECONDS = 12


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def settled_rss(pid: int, seconds: float) -> int:
    """daphne's RSS once it stopped growing (or after `seconds`)."""
    deadline = time.monotonic() + seconds
    last = rss_bytes(pid)
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = rss_bytes(pid)
        if now == last:
            break
        last = now
    return last


def make_entries() -> None:
    rows = [
        AuditEntry(
            actor_label="loader",
            action="export.test",
            target_type="run",
            target_id=str(n),
            before={"n": n, "pad": PAD},
            after={"n": n},
            source="cli",
        )
        for n in range(ENTRIES)
    ]
    AuditEntry.objects.bulk_create(rows, batch_size=2000)


def stalled_request(port: int, path: str, headers: dict[str, str]) -> socket.socket:
    """A raw HTTP/1.1 client with a small receive window that reads READ_BEFORE_STALL
    bytes of the answer and then stops reading (the socket stays open)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    sock.connect(("127.0.0.1", port))
    lines = [f"GET {path} HTTP/1.1", "Host: 127.0.0.1", *(f"{k}: {v}" for k, v in headers.items())]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    received = b""
    sock.settimeout(20)
    while len(received) < READ_BEFORE_STALL:
        chunk = sock.recv(4096)
        assert chunk, received[:500]
        received += chunk
    assert received.startswith(b"HTTP/1.1 200"), received[:500]
    return sock


def cut_off(sock: socket.socket, size: int) -> bool:
    """Whether the server dropped the connection: reading what reached this side ends
    in a reset (or an end) long before the export's `size`."""
    got = 0
    sock.settimeout(10)
    try:
        while got < size:
            chunk = sock.recv(1 << 20)
            if not chunk:
                break
            got += len(chunk)
    except ConnectionResetError:
        pass
    except TimeoutError:  # nothing more, the connection still open: not cut
        return False
    return got < size // 2


@pytest.mark.timeout(300)  # 60,000 rows written, read twice, and a stall to wait out
def test_a_client_that_stops_reading_leaves_daphnes_memory_bounded(
    processes: Any, service_env: dict[str, str]
) -> None:
    make_entries()
    headers = {"Authorization": f"Bearer {token_for(User.objects.create_superuser('exporter'))}"}
    port = free_port()
    service_env["API_THROTTLE_RATE"] = "1000000/min"
    service_env["AWAKEN_STREAM_STALL_SECONDS"] = str(STALL_SECONDS)
    daphne = processes("daphne", port=port)
    base = f"http://127.0.0.1:{port}"
    url = "/api/v1/audit/export.csv?action=export.test"

    # read to the end: the whole export arrives (and daphne has run every code path once)
    with httpx.Client(base_url=base, headers=headers, timeout=60, trust_env=False) as client:
        body = client.get(url).content
    lines = body.count(b"\r\n")
    assert lines == ENTRIES + 1, body[-300:]  # the header and every row, not truncated
    size = len(body)
    assert size > 60_000_000

    before = settled_rss(daphne.pid, 5)
    sock = stalled_request(port, url, headers)
    stalled_at = time.monotonic()
    try:
        time.sleep(3.0)  # daphne had the time to read the whole export if it would
        grown = settled_rss(daphne.pid, 15) - before
        # a client stalled for AWAKEN_STREAM_STALL_SECONDS is cut off (its cursor closed)
        time.sleep(max(stalled_at + STALL_SECONDS + 5 - time.monotonic(), 0))
        cut = cut_off(sock, size)
    finally:
        sock.close()
    # without back-pressure daphne holds most of the export (its size and more)
    assert grown < size // 5, (
        f"daphne grew by {grown / 1e6:.1f} MB for a {size / 1e6:.1f} MB export"
    )
    assert cut, "the stalled client was not cut off"

    # the stalled client's going away ends the export; daphne keeps serving
    with httpx.Client(base_url=base, headers=headers, timeout=60, trust_env=False) as client:
        wait_for(lambda: client.get("/api/v1/audit?limit=1").status_code == 200, 10, "daphne")
