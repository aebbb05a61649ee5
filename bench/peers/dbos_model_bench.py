"""The DBOS Transact peer of the model-bound bench (bench/model_bound.py), in process.

Run with the peers' interpreter (.venv-peers/bin/python), never the project's:
`python bench/peers/dbos_model_bench.py '<json options>'`. The same run as the others:
step "model" (a streamed Chat Completions call to the bench's model server with httpx,
answered by a `calculator` tool call), step "tool", step "model" (the text answer). DBOS
is a library: the client is in the same process (start_workflow -> get_result) on a
thread pool of `concurrency` threads, and DBOS runs the workflows on its executor with
`max_executor_threads` = the largest concurrency. Each thread has its own httpx client
(no pool lock shared by hundreds of threads).

Options: database_url, base_url, workloads [[runs, concurrency, rounds], ...].
Prints one line `RESULT <json>` at the end; everything else is log.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from dbos import DBOS, DBOSConfig

BASE_URL = ""
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "calculator",
            "description": "Evaluate an arithmetic expression.",
            "parameters": {
                "type": "object",
                "properties": {"expression": {"type": "string"}},
                "required": ["expression"],
            },
        },
    }
]
_local = threading.local()


def client() -> httpx.Client:
    if not hasattr(_local, "client"):
        _local.client = httpx.Client(timeout=120, trust_env=False)
    return _local.client  # type: ignore[no-any-return]


def chat(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """One streamed completion, assembled into an assistant message."""
    body = {
        "model": "bench-model",
        "messages": messages,
        "tools": TOOLS,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    text, calls = "", {}  # type: ignore[var-annotated]
    with client().stream("POST", f"{BASE_URL}/chat/completions", json=body) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                text += delta.get("content") or ""
                for call in delta.get("tool_calls") or []:
                    slot = calls.setdefault(call["index"], {"id": "", "name": "", "arguments": ""})
                    slot["id"] = call.get("id") or slot["id"]
                    function = call.get("function") or {}
                    slot["name"] += function.get("name") or ""
                    slot["arguments"] += function.get("arguments") or ""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for c in calls.values()
        ]
    return message


@DBOS.step()
def model_step(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return chat(messages)


@DBOS.step()
def tool_step(call: dict[str, Any]) -> dict[str, Any]:
    expression = json.loads(call["function"]["arguments"])["expression"]
    left, right = expression.split("*", 1)
    return {"role": "tool", "tool_call_id": call["id"], "content": str(int(left) * int(right))}


@DBOS.workflow()
def agent_run(text: str) -> str:
    messages: list[dict[str, Any]] = [{"role": "user", "content": text}]
    reply = model_step(messages)
    messages.append(reply)
    messages.append(tool_step(reply["tool_calls"][0]))
    return str(model_step(messages)["content"])


def run_once(index: int) -> float:
    started = time.perf_counter()
    handle = DBOS.start_workflow(agent_run, f"dbos run {index}: what is 6*7?")
    answer = handle.get_result()
    if "42" not in answer:
        raise RuntimeError(f"workflow {handle.workflow_id} answered {answer!r}")
    return time.perf_counter() - started


def model_stats(path: str) -> dict[str, Any]:
    """The model server's counters (GET /stats, POST /stats/reset)."""
    root = BASE_URL.removesuffix("/v1")
    method = "POST" if path.endswith("reset") else "GET"
    return dict(httpx.request(method, f"{root}{path}", timeout=10, trust_env=False).json())


def drive(count: int, concurrency: int) -> dict[str, Any]:
    model_stats("/stats/reset")
    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        times = list(pool.map(run_once, range(count), timeout=600))
    seconds = time.perf_counter() - started
    ordered = sorted(times)
    stats = model_stats("/stats")
    return {
        "model_max_in_flight": stats["max_in_flight"],
        "model_calls": stats["calls"],
        "runs": count,
        "concurrency": concurrency,
        "seconds": seconds,
        "rate": count / seconds,
        "p50_s": statistics.median(times),
        "p99_s": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
    }


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def main() -> None:
    global BASE_URL
    options = json.loads(sys.argv[1])
    BASE_URL = options["base_url"].rstrip("/")
    workloads = [tuple(int(x) for x in w) for w in options["workloads"]]
    threads = max(c for _, c, _ in workloads)
    config: DBOSConfig = {
        "name": "awaken-bench-dbos-model",
        "system_database_url": options["database_url"],
        "sys_db_pool_size": int(options.get("pool_size", 20)),
        "max_executor_threads": threads,
        "log_level": "WARNING",
        "executor_id": f"bench-{uuid.uuid4().hex[:8]}",
    }
    DBOS(config=config)
    DBOS.launch()
    results: list[dict[str, Any]] = []
    try:
        drive(8, 8)  # warm-up
        for runs, concurrency, rounds in workloads:
            for index in range(rounds):
                figures = drive(runs, concurrency)
                figures["round"] = index + 1
                results.append(figures)
                log(
                    f"  DBOS {runs}@{concurrency} round {index + 1}: {figures['seconds']:.2f}s, "
                    f"{figures['rate']:.1f} runs/s, p50 {figures['p50_s']:.2f}s"
                )
    finally:
        DBOS.destroy(workflow_completion_timeout_sec=0)
    print("RESULT " + json.dumps({"workloads": results, "pid": os.getpid()}), flush=True)


if __name__ == "__main__":
    main()
