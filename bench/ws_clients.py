"""The clients' side of bench/ws_fanout.py: N websockets in ONE asyncio process, like a
crowd of browser tabs, started by `python -m bench.ws_fanout --clients CONFIG`. Each tab
connects (at most HANDSHAKES_AT_ONCE at a time) and waits for `ready`, then follows a
run's stream (every event's seq and receipt time) or the dashboard (every finished run,
every `figures` message). No Django here: the process is the browser side.

The config (JSON) gives `mode` ("run" or "dashboard"), `url`, `cookie`, `origin`,
`clients`, `count` (events or finishes to wait for), `follow_seconds`, `quiet` (dashboard:
seconds without a message once every finish came) and `out`, where the results go."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path
from typing import Any

import websockets

HANDSHAKES_AT_ONCE = 50  # daphne's listen backlog is 50

# event keys only: the rows' HTML has its quotes escaped. Frames are matched as bytes
# (recv(decode=False)): decoding 10,000 frames a second costs the clients' process CPU.
SEQ = re.compile(rb'"seq": (\d+)')


class Tab:
    """One browser tab: a websocket and what it received."""

    def __init__(self) -> None:
        self.socket: Any = None
        self.error = ""
        self.received: list[list[int]] = []  # run streams: [seq, receipt ns]
        self.finished: list[tuple[str, int]] = []  # dashboards: [run id, receipt ns]
        self.figures: list[tuple[int, int]] = []  # dashboards: [receipt ns, len(html)]
        self.last_run = 0  # dashboards: receipt ns of the last `run` message
        self.frames = 0


async def _open(tab: Tab, url: str, headers: dict[str, str], gate: asyncio.Semaphore) -> None:
    async with gate:
        try:
            tab.socket = await websockets.connect(
                url, additional_headers=headers, max_queue=None, open_timeout=60
            )
            while True:  # the replay (none: we connect after the last seq), then `ready`
                raw = await asyncio.wait_for(tab.socket.recv(), 60)
                if raw.startswith('{"type": "ready"'):
                    return
        except Exception as exc:
            tab.error = repr(exc)[:300]


async def _follow_run(tab: Tab, count: int, deadline: float) -> None:
    seen: set[int] = set()
    try:
        async with asyncio.timeout(deadline - time.time()):  # one timer, not one per frame
            while len(seen) < count:
                raw = await tab.socket.recv(decode=False)
                received = time.time_ns()
                if not raw.startswith(b'{"type": "event'):
                    continue
                tab.frames += 1
                for seq in map(int, SEQ.findall(raw)):
                    tab.received.append([seq, received])
                    seen.add(seq)
    except Exception:  # the deadline, or the socket closed
        return


async def _follow_dashboard(tab: Tab, count: int, deadline: float, quiet: float) -> None:
    """Every finish, then the figures until none came for `quiet` seconds."""
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline - time.time()
    try:
        async with asyncio.timeout_at(end) as timer:  # one timer, moved once all finished
            while True:
                raw = await tab.socket.recv(decode=False)
                received = time.time_ns()
                message = json.loads(raw)
                if message.get("type") == "figures":
                    tab.figures.append((received, len(message["html"])))
                elif message.get("type") == "run":
                    tab.frames += 1
                    tab.last_run = received
                    if message["run"].get("status") == "done":
                        tab.finished.append((message["run"]["id"], received))
                else:
                    continue
                if len(tab.finished) >= count:
                    timer.reschedule(min(loop.time() + quiet, end))
    except TimeoutError:  # the deadline, or quiet since the last figures
        return
    except Exception as exc:  # the socket closed
        tab.error = repr(exc)[:300]


async def clients_main(config: dict[str, Any]) -> dict[str, Any]:
    headers = {"Cookie": config["cookie"], "Origin": config["origin"]}
    tabs = [Tab() for _ in range(config["clients"])]
    gate = asyncio.Semaphore(HANDSHAKES_AT_ONCE)
    started = time.monotonic()
    await asyncio.gather(*(_open(tab, config["url"], headers, gate) for tab in tabs))
    connect_seconds = time.monotonic() - started
    live = [tab for tab in tabs if tab.socket is not None and not tab.error]
    print(f"READY {len(live)} {len(tabs) - len(live)}", flush=True)
    cpu_started, wall_started = time.process_time(), time.monotonic()
    deadline = time.time() + config["follow_seconds"]
    try:
        if config["mode"] == "run":
            await asyncio.gather(*(_follow_run(tab, config["count"], deadline) for tab in live))
        else:
            await asyncio.gather(
                *(
                    _follow_dashboard(tab, config["count"], deadline, config["quiet"])
                    for tab in live
                )
            )
    finally:
        await asyncio.gather(
            *(tab.socket.close() for tab in tabs if tab.socket is not None),
            return_exceptions=True,
        )
    return {
        "cpu_share": (time.process_time() - cpu_started) / (time.monotonic() - wall_started),
        "connect_seconds": connect_seconds,
        "errors": [tab.error for tab in tabs if tab.error],
        "tabs": [
            {
                "received": tab.received,
                "finished": tab.finished,
                "figures": tab.figures,
                "last_run": tab.last_run,
                "frames": tab.frames,
            }
            for tab in live
        ],
    }


def run_clients(config_path: Path) -> None:
    """The child process's work: the tabs of the config, their results written to `out`."""
    config = json.loads(config_path.read_text())
    result = asyncio.run(clients_main(config))
    Path(config["out"]).write_text(json.dumps(result))
