"""Child process of bench/event_latency.py: K listeners in one asyncio loop that stamp
`time.time_ns()` on every frame they receive.

    listeners.py ws    URL K COUNT TIMEOUT OUT  (BENCH_WS_COOKIE, BENCH_WS_ORIGIN in env)
    listeners.py redis URL K COUNT TIMEOUT OUT  (BENCH_CHANNEL in env)

`ws` connects K websocket clients to a run stream on daphne and waits for each one's
`{"type": "ready"}`; `redis` subscribes K redis-py asyncio pub/sub connections. Once all
K are listening it prints READY. Websocket listeners read `{"type": "event"}` frames and
the batched `{"type": "events", "events": [{"event", "html"}, ...]}` ones (each event
stamped with its frame's receipt). Each listener stops after COUNT events, 2 s after the
last frame, or at TIMEOUT seconds; then {"clients": [[[seq, recv_ns], ...], ...], "errors"}
is written to OUT as JSON. No Django here: the process is the browser side.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

import redis.asyncio as aioredis
import websockets

IDLE_AFTER_LAST = 2.0


async def ws_listener(
    url: str, count: int, deadline: float, ready: asyncio.Event, out: list[list[int]]
) -> None:
    headers = {"Cookie": os.environ["BENCH_WS_COOKIE"], "Origin": os.environ["BENCH_WS_ORIGIN"]}
    async with websockets.connect(url, additional_headers=headers, max_queue=None) as socket:
        while True:  # the backfill (empty: we connect after the last seq) then `ready`
            frame = json.loads(await asyncio.wait_for(socket.recv(), deadline - time.time()))
            if frame.get("type") == "ready":
                break
        ready.set()
        while len(out) < count:
            wait = deadline - time.time()
            if out:
                wait = min(wait, IDLE_AFTER_LAST)
            if wait <= 0:
                return
            try:
                raw = await asyncio.wait_for(socket.recv(), wait)
            except TimeoutError:
                return
            received = time.time_ns()
            frame = json.loads(raw)
            if frame.get("type") == "event":
                out.append([frame["event"]["seq"], received])
            elif frame.get("type") == "events":  # a busy run's batch: one stamp for all
                out.extend([item["event"]["seq"], received] for item in frame["events"])


async def redis_listener(
    url: str, count: int, deadline: float, ready: asyncio.Event, out: list[list[int]]
) -> None:
    client = aioredis.Redis.from_url(url)
    pubsub = client.pubsub()
    try:
        await pubsub.subscribe(os.environ["BENCH_CHANNEL"])
        while True:  # the subscribe confirmation
            message = await pubsub.get_message(timeout=max(deadline - time.time(), 0.01))
            if message and message["type"] == "subscribe":
                break
            if time.time() > deadline:
                raise TimeoutError("no subscribe confirmation")
        ready.set()
        while len(out) < count:
            wait = deadline - time.time()
            if out:
                wait = min(wait, IDLE_AFTER_LAST)
            if wait <= 0:
                return
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=wait)
            if message is None:
                if out:
                    return
                continue
            received = time.time_ns()
            out.append([json.loads(message["data"])["seq"], received])
    finally:
        await pubsub.aclose()
        await client.aclose()


async def main(mode: str, url: str, clients: int, count: int, timeout: float) -> dict[str, Any]:
    deadline = time.time() + timeout
    listener = ws_listener if mode == "ws" else redis_listener
    readies = [asyncio.Event() for _ in range(clients)]
    results: list[list[list[int]]] = [[] for _ in range(clients)]
    tasks = [
        asyncio.create_task(listener(url, count, deadline, readies[i], results[i]))
        for i in range(clients)
    ]

    async def all_ready() -> None:
        await asyncio.gather(*(event.wait() for event in readies))
        print("READY", flush=True)

    announcer = asyncio.create_task(all_ready())
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    announcer.cancel()
    errors = [repr(o) for o in outcomes if isinstance(o, BaseException)]
    return {"clients": results, "errors": errors}


if __name__ == "__main__":
    mode, url, clients, count, timeout, out = sys.argv[1:7]
    result = asyncio.run(main(mode, url, int(clients), int(count), float(timeout)))
    with open(out, "w") as handle:
        json.dump(result, handle)
