from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from agents.errors import NothingToPublish
from agents.models import Agent, Model, ModelProvider
from agents.models_mcp import McpServer
from agents.services.agents import agent_publish, agent_validate
from agents.services.mcp import mcp_probe
from common.audit import Actor

DEMO_AGENTS: list[dict[str, Any]] = [
    {
        "slug": "assistant",
        "name": "Assistant (auto-allowed tools)",
        "description": "Answers questions with a calculator, the clock and web fetches; "
        "prepares reports in the background.",
        "system_prompt": "You are a helpful assistant. Use tools when they help.",
        "tools": ["calculator", "current_time", "http_get", "slow_report"],
        "permission": {"default_behavior": "allow", "rules": []},
    },
    {
        "slug": "approver",
        "name": "Note taker (writes and emails need approval)",
        "description": "Writes notes and sends emails, each after an operator approves.",
        "system_prompt": "You keep notes and send emails for the team.",
        "tools": ["write_note", "send_email", "calculator", "current_time"],
        "permission": {
            "default_behavior": "allow",
            "rules": [
                {"tool": "write_note", "behavior": "ask"},
                {"tool": "send_email", "behavior": "ask"},
            ],
        },
    },
    {
        "slug": "helpdesk",
        "name": "Helpdesk (asks a human)",
        "description": "Asks a human operator whenever it needs information.",
        "system_prompt": "When you need information, ask a human.",
        "tools": ["ask_human", "current_time"],
        "permission": {"default_behavior": "allow", "rules": []},
    },
    {
        "slug": "manager",
        "name": "Manager (delegates to the assistant)",
        "description": "Hands tasks to the assistant agent and reports its answer.",
        "system_prompt": "Delegate tasks to your assistant and report back.",
        "tools": [],
        "permission": {"default_behavior": "allow", "rules": []},
        "delegates": ["assistant"],
    },
    {
        "slug": "coordinator",
        "name": "Coordinator (delegates to the note taker)",
        "description": "Hands note-taking to the approver agent, whose writes need approval.",
        "system_prompt": "Delegate note-taking to the note taker and report back.",
        "tools": [],
        "permission": {"default_behavior": "allow", "rules": []},
        "delegates": ["approver"],
    },
]
# An agent with the tools of the repository's MCP server (agents/mcp/demo_server.py, over
# stdio: AWAKEN_MCP_STDIO_COMMANDS allows it as `demo`); reversing a text asks first.
MCP_AGENT: dict[str, Any] = {
    "slug": "toolsmith",
    "name": "Toolsmith (MCP tools)",
    "description": "Counts words and reverses texts with the demo MCP server's tools.",
    "system_prompt": "Use your MCP tools on the user's text.",
    "tools": ["mcp__demo__word_count", "mcp__demo__reverse_text"],
    "permission": {
        "default_behavior": "allow",
        "rules": [{"tool": "mcp__demo__reverse_*", "behavior": "ask"}],
    },
}


class Command(BaseCommand):
    help = "Create the demo model and agents, and an admin user whose password is printed once."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--admin-username", default="admin")
        parser.add_argument(
            "--reset-password",
            action="store_true",
            help="set a new admin password even if it exists",
        )

    @transaction.atomic
    def handle(self, *args: Any, admin_username: str, reset_password: bool, **options: Any) -> None:
        provider, _ = ModelProvider.objects.update_or_create(
            slug="scripted",
            defaults={"name": "Scripted (offline)", "kind": ModelProvider.Kind.SCRIPTED},
        )
        model, _ = Model.objects.update_or_create(
            slug="demo", defaults={"provider": provider, "upstream_model": "", "script": []}
        )
        agents = {}
        specs = DEMO_AGENTS + ([MCP_AGENT] if self._mcp_demo_server() else [])
        for spec in specs:
            fields = {k: v for k, v in spec.items() if k not in ("slug", "delegates")}
            agent, _ = Agent.objects.update_or_create(
                slug=spec["slug"], defaults={**fields, "model": model}
            )
            agents[spec["slug"]] = agent
        for spec in specs:
            agents[spec["slug"]].delegates.set([agents[d] for d in spec.get("delegates", [])])
        actor = Actor(label="seed_demo", source="cli")
        published = []
        for agent in agents.values():  # delegates come first in DEMO_AGENTS
            agent.full_clean()  # the fields (slug, choices)
            errors = agent_validate(agent)  # the configuration (tools, rules, delegates)
            if errors:
                listed = "; ".join(f"{field}: {message}" for field, message in errors.items())
                raise CommandError(f"demo agent {agent.slug!r} is invalid: {listed}")
            try:
                version = agent_publish(agent=agent, actor=actor, note="demo seed")
                published.append(f"{agent.slug} v{version.number}")
            except NothingToPublish:
                pass  # seeded before and unchanged
        self.stdout.write(f"demo agents: {', '.join(sorted(agents))} (model 'demo', scripted)")
        if published:
            self.stdout.write(f"published: {', '.join(published)}")

        self._admin_user(admin_username, reset_password)

    def _mcp_demo_server(self) -> bool:
        """The demo MCP server, checked (its tools listed); False (and a warning) when it
        cannot be used, e.g. `demo` taken off AWAKEN_MCP_STDIO_COMMANDS."""
        server, _ = McpServer.objects.update_or_create(
            slug="demo",
            defaults={"name": "Demo MCP server (stdio)", "transport": "stdio", "command": "demo"},
        )
        result = mcp_probe(server)
        if not result.ok:
            self.stderr.write(f"demo MCP server unusable, no toolsmith agent: {result.error}")
        return result.ok

    def _admin_user(self, admin_username: str, reset_password: bool) -> None:
        User = get_user_model()
        user = User.objects.filter(username=admin_username).first()
        if user is None or reset_password:
            password = secrets.token_urlsafe(12)
            if user is None:
                user = User.objects.create_superuser(admin_username, "", password)
            else:
                user.set_password(password)
                user.save(update_fields=["password"])
            self.stdout.write(
                f"admin user {admin_username!r} password: {password}  (shown once; "
                "`seed_demo --reset-password` sets a new one)"
            )
        else:
            self.stdout.write(f"admin user {admin_username!r} exists; password unchanged")
