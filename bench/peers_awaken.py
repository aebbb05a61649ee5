"""Awaken's side of bench/peers_compare.py prepared in this process: the two bench agents
(published like any agent), the operator's API token, and the SQL per plain run counted
here (the POST through Django's test client, then `run_advance` called directly).

Django and the application are imported inside the functions: they need django.setup(),
which runs after the environment is set (see bench/common.py)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

from bench import common
from bench.common import BenchError
from bench.peers_settings import APPROVAL_AGENT, PLAIN_AGENT, SCRIPT, SQL_LOG


def create_bench_agents() -> None:
    """bench-assistant (calculator allowed) and bench-approver (calculator asks), both
    scripted with no delay, created and published like any agent."""
    from agents.models import Agent, Model, ModelProvider
    from agents.services.agents import agent_publish
    from common.audit import Actor

    provider, _ = ModelProvider.objects.get_or_create(
        slug="bench-scripted",
        defaults={"name": "Bench scripted", "kind": ModelProvider.Kind.SCRIPTED},
    )
    model, _ = Model.objects.update_or_create(
        slug="bench-calculator", defaults={"provider": provider, "script": SCRIPT}
    )
    rules = {
        PLAIN_AGENT: [],
        APPROVAL_AGENT: [{"tool": "calculator", "behavior": "ask"}],
    }
    for slug, agent_rules in rules.items():
        agent, _ = Agent.objects.update_or_create(
            slug=slug,
            defaults={
                "name": slug,
                "model": model,
                "system_prompt": "You are a benchmark agent.",
                "tools": ["calculator"],
                "permission": {"default_behavior": "allow", "rules": agent_rules},
            },
        )
        agent_publish(agent=agent, actor=Actor(label="bench", source="cli"))


def create_token() -> str:
    """An operator and a personal API token for it (the raw token, shown once)."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from common.api.tokens import token_create
    from common.audit import Actor

    user, _ = get_user_model().objects.get_or_create(username="bench-operator")
    user.groups.add(Group.objects.get(name="operator"))
    _, raw = token_create(user=user, name="bench", actor=Actor(label="bench", source="cli"))
    return raw


# --- SQL per run, counted in this process --------------------------------------------------------


@dataclass
class SqlCount:
    statements: int = 0
    transactions: int = 0
    pending: int = 0  # statements in the open atomic block
    log: list[str] = field(default_factory=list)  # the latest run's, when SQL_LOG

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        from django.db import connection

        self.statements += 1
        if connection.in_atomic_block:
            self.pending += 1
        else:
            self.transactions += 1  # autocommit: a transaction of its own
        if SQL_LOG:
            self.log.append(("  [tx] " if connection.in_atomic_block else "  [auto] ") + sql[:160])
        return execute(sql, params, many, context)

    def block_ended(self) -> None:
        if self.pending:
            self.transactions += 1
            self.pending = 0
            if SQL_LOG:
                self.log.append("  COMMIT/ROLLBACK")


@dataclass
class SqlFigures:
    runs: int
    web: SqlCount
    worker: SqlCount

    def per_run(self, attribute: str) -> tuple[float, float, float]:
        web = getattr(self.web, attribute) / self.runs
        worker = getattr(self.worker, attribute) / self.runs
        return web + worker, web, worker


def count_sql(token: str, runs: int) -> SqlFigures:
    """`runs` plain runs: the POST through Django's test client with the bearer token (the
    web side), then `run_advance` called directly (the worker side), counting statements
    with an execute wrapper and transactions as autocommit statements plus atomic blocks
    that ran at least one (their COMMIT or ROLLBACK). Enqueueing is disabled meanwhile
    (no SQL: a Redis write), so the real worker does not see these runs."""
    from django.db import connection
    from rest_framework.test import APIClient

    from runs.services import dispatch
    from runs.services.execution import run_advance

    # the test client builds the middleware stack, whose static files check wants a
    # collectstatic directory that a bench environment does not have
    warnings.filterwarnings("ignore", message="No directory at")

    client = APIClient(HTTP_HOST=common.HOST)
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    body = {"agent_id": PLAIN_AGENT, "messages": [{"role": "user", "content": "what is 6*7?"}]}
    counts = {"web": SqlCount(), "worker": SqlCount(), "none": SqlCount()}
    current = ["none"]

    def wrapped(name: str) -> Callable[..., Any]:
        original = getattr(connection, name)

        def ended(*args: Any, **kwargs: Any) -> Any:
            counts[current[0]].block_ended()
            return original(*args, **kwargs)

        return ended

    def one_run(counted: bool) -> None:
        current[0] = "web" if counted else "none"
        response = client.post("/api/v1/runs", body, format="json", **headers)
        if response.status_code != 201:
            raise BenchError(
                f"POST /api/v1/runs: {response.status_code} {response.content[:300]!r}"
            )
        run_id = response.json()["run_id"]
        current[0] = "worker" if counted else "none"
        run_advance(run_id=run_id)
        current[0] = "none"
        check_answered(run_id)

    with (
        mock.patch.object(dispatch, "_enqueue", lambda run_id: None),
        mock.patch.object(connection, "commit", wrapped("commit")),
        mock.patch.object(connection, "rollback", wrapped("rollback")),
        connection.execute_wrapper(lambda *a: counts[current[0]](*a)),
    ):
        for _ in range(2):  # warm-up: connection set-up, caches
            one_run(False)
        for index in range(runs):
            if index == runs - 1:
                counts["web"].log.clear()
                counts["worker"].log.clear()
            one_run(True)
    if SQL_LOG:
        print_last_run_sql(counts)
    return SqlFigures(runs, counts["web"], counts["worker"])


def check_answered(run_id: str) -> None:
    """The in-process run ended naturally with the calculator's answer."""
    from runs.models import Run

    status = Run.objects.values_list("status_reason", "final_output").get(pk=run_id)
    if tuple(status) != ("natural", "42"):
        raise BenchError(f"in-process run {run_id} ended {status}")


def print_last_run_sql(counts: dict[str, SqlCount]) -> None:
    for side in ("web", "worker"):
        print(f"  SQL of the last run, {side}:\n" + "\n".join(counts[side].log), flush=True)
