"""The DBOS Transact peer: the same 2-step agent as a durable workflow, in process.

Run by bench/peers_compare.py with the peers' interpreter (.venv-peers/bin/python), never
the project's: `python bench/peers/dbos_bench.py '<json options>'`. DBOS is a library, so
there is no server and no HTTP: the client is in the same process (start_workflow ->
get_result), on a thread pool of `concurrency` threads. Its figures therefore include
the client's own CPU and leave out any network hop.

The workflow: step "model" (a tool call to calculator 6*7), step "tool", step "model"
("42"). The approval variant publishes the call with `DBOS.set_event("ticket", …)` and
waits in `DBOS.recv("decision")`; the client reads the ticket with `DBOS.get_event` and
resumes it with `DBOS.send`.

Prints one line `RESULT <json>` at the end; everything else is log.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from dbos import DBOS, DBOSConfig

TIMEOUT = 30.0


@DBOS.step()
def model_step(messages: list[dict[str, Any]]) -> dict[str, Any]:
    if any(message["role"] == "tool" for message in messages):
        return {"role": "assistant", "content": "42"}
    call = {"id": "call_calc", "name": "calculator", "arguments": {"expression": "6*7"}}
    return {"role": "assistant", "content": "", "tool_calls": [call]}


@DBOS.step()
def tool_step(call: dict[str, Any]) -> dict[str, Any]:
    left, right = call["arguments"]["expression"].split("*", 1)
    return {"role": "tool", "tool_call_id": call["id"], "content": str(int(left) * int(right))}


@DBOS.workflow()
def agent_run(text: str, approval: bool) -> str:
    messages: list[dict[str, Any]] = [{"role": "user", "content": text}]
    reply = model_step(messages)
    messages.append(reply)
    call = reply["tool_calls"][0]
    if approval:
        DBOS.set_event("ticket", call)
        if DBOS.recv("decision", timeout_seconds=TIMEOUT) != "approve":
            return "not approved"
    messages.append(tool_step(call))
    return str(model_step(messages)["content"])


def plain_once() -> tuple[float, None]:
    started = time.perf_counter()
    handle = DBOS.start_workflow(agent_run, "what is 6*7?", False)
    if handle.get_result() != "42":
        raise RuntimeError(f"workflow {handle.workflow_id} did not answer 42")
    return (time.perf_counter() - started) * 1000, None


def approval_once() -> tuple[float, float]:
    started = time.perf_counter()
    handle = DBOS.start_workflow(agent_run, "what is 6*7?", True)
    if DBOS.get_event(handle.workflow_id, "ticket", timeout_seconds=TIMEOUT) is None:
        raise RuntimeError(f"workflow {handle.workflow_id}: no ticket")
    approve_started = time.perf_counter()
    DBOS.send(handle.workflow_id, "approve", "decision")
    if handle.get_result() != "42":
        raise RuntimeError(f"workflow {handle.workflow_id} did not answer 42")
    now = time.perf_counter()
    return (now - started) * 1000, (now - approve_started) * 1000


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def drive(kind: str, count: int, concurrency: int) -> dict[str, Any]:
    operation = plain_once if kind == "plain" else approval_once
    cpu = cpu_seconds()
    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        results = list(pool.map(lambda _: operation(), range(count), timeout=120))
    seconds = time.perf_counter() - started
    approve = [r[1] for r in results if r[1] is not None]
    return {
        "rate": count / seconds,
        "seconds": seconds,
        "cpu_ms_per_op": (cpu_seconds() - cpu) * 1000 / count,
        "finish_ms": [r[0] for r in results],
        "finish_p50_ms": statistics.median(r[0] for r in results),
        "approve_p50_ms": statistics.median(approve) if approve else None,
    }


def memory_mb() -> tuple[float, float]:
    rss = pss = 0
    with open(f"/proc/{os.getpid()}/smaps_rollup") as rollup:
        for line in rollup:
            if line.startswith("Rss:"):
                rss += int(line.split()[1])
            elif line.startswith("Pss:"):
                pss += int(line.split()[1])
    return rss / 1024, pss / 1024


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def main() -> None:
    options = json.loads(sys.argv[1])
    database_url = options["database_url"]
    config: DBOSConfig = {
        "name": "awaken-bench-dbos",
        "system_database_url": database_url,
        "sys_db_pool_size": int(options.get("pool_size", 20)),
        "log_level": "WARNING",
        "executor_id": f"bench-{uuid.uuid4().hex[:8]}",
    }
    DBOS(config=config)
    DBOS.launch()
    try:
        result: dict[str, Any] = {"plain": [], "approval": [], "latency": {}}
        concurrency = int(options["concurrency"])
        drive("plain", 2 * concurrency, concurrency)  # warm-up
        drive("approval", concurrency, concurrency)
        for index in range(int(options["rounds"])):
            plain = drive("plain", int(options["runs"]), concurrency)
            approval = drive("approval", int(options["cycles"]), concurrency)
            for name, figures in (("plain", plain), ("approval", approval)):
                figures.pop("finish_ms")
                result[name].append(figures)
            log(
                f"  DBOS round {index + 1}: {plain['rate']:.1f} workflows/s, "
                f"{approval['rate']:.1f} approval cycles/s"
            )
        # latency at concurrency 1
        latency_runs = int(options["latency_runs"])
        plain = drive("plain", latency_runs, 1)
        approval = drive("approval", latency_runs, 1)
        result["latency"] = {
            "finish_p50_ms": plain["finish_p50_ms"],
            "approve_p50_ms": approval["approve_p50_ms"],
        }
        total = 3 * concurrency + latency_runs * 2
        total += int(options["rounds"]) * (int(options["runs"]) + int(options["cycles"]))
        missing = int(options.get("memory_runs", 0)) - total
        if missing > 0:  # as many workflows as the other systems ran before their memory
            drive("plain", missing, concurrency)
            total += missing
        rss, pss = memory_mb()
        result["memory"] = {"rss_mb": rss, "pss_mb": pss}
        result["workflows"] = total
    finally:
        DBOS.destroy(workflow_completion_timeout_sec=0)
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
