"""MCP tool servers: validation that says what to fix (the stdio allow-list, the SSRF guard
at save time; the runtime guards again at every connection), the check that lists a
server's tools and records its health (`mcp_probe`; audited when an operator asks,
`mcp_check`), and the tools agents take from the servers: the names they may pick, the
schemas a published version freezes (`mcp_tools_spec`) and the runtime tools a pinned
version calls (`mcp_tools_for_spec`).

Secrets (the bearer token, extra headers) are decrypted only into the `Connection` the
client uses: never into events, results, logs or error messages."""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from agents.models import Health
from agents.models_mcp import McpServer
from agents.secrets import SecretError
from common.audit import Actor, audit_record
from common.teams import ensure_writable
from runs.runtime import aio
from runs.runtime.netguard import AddressPolicy, AddressRefusedError, UnresolvedHostError
from runs.runtime.ports import CancellationToken

from .address_guard import allow_private_hint
from .health import mcp_server_health_record

if TYPE_CHECKING:
    from agents.mcp.client import Connection
    from agents.mcp.tool import McpTool

# The MCP SDK (and agents.mcp, built on it) is imported where a server is contacted or a
# run gets its tools, not at start-up: it costs every process ~35 MB and ~0.7 s to load,
# and most never talk to an MCP server.

logger = logging.getLogger(__name__)

PREFIX = "mcp__"
MAX_NAME = 64  # what model APIs accept as a tool name
MAX_TOOLS = 500
MAX_DESCRIPTION = 2000
ALLOW_PRIVATE_HINT = allow_private_hint("AWAKEN_MCP_ALLOW_PRIVATE", "MCP servers")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def is_mcp_tool(name: Any) -> bool:
    return isinstance(name, str) and name.startswith(PREFIX)


def address_policy() -> AddressPolicy:
    return AddressPolicy.from_setting(getattr(settings, "AWAKEN_MCP_ALLOW_PRIVATE", False))


def stdio_commands() -> dict[str, list[str]]:
    return dict(getattr(settings, "AWAKEN_MCP_STDIO_COMMANDS", {}) or {})


# -- validation ----------------------------------------------------------------------------


def _address_check(url: str) -> tuple[str, str]:
    """(why the URL's host may not be used, a warning): the guard at save time."""
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        host = (parts.hostname or "").encode("idna").decode("ascii")
    except (ValueError, UnicodeError) as exc:
        return f"Invalid host or port: {exc}.", ""
    try:
        address_policy().vet(host, port)
    except UnresolvedHostError as exc:
        return "", str(exc)
    except AddressRefusedError as exc:
        return f"Refused: {exc}. {ALLOW_PRIVATE_HINT}", ""
    return "", ""


def _url_error(url: str, *, check_address: bool, warnings: list[str] | None) -> str:
    parts = urlsplit(url)
    if not url:
        return "Enter the server's streamable HTTP URL, e.g. https://tools.example.com/mcp."
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "Use an absolute http:// or https:// URL with a host."
    if parts.username is not None or parts.password is not None:
        return "Remove the user:password part of the URL; put the secret in the token."
    if not check_address:
        return ""
    problem, warning = _address_check(url)
    if warning and not problem:
        if warnings is None:
            return f"Unreachable: {warning}."
        warnings.append(f"URL: {warning}. Saved; checks and runs fail until it resolves.")
    return problem


def mcp_server_config_errors(
    server: McpServer,
    *,
    headers: dict[str, Any] | None = None,
    check_address: bool = True,
    warnings: list[str] | None = None,
) -> dict[str, str]:
    """Field -> what to fix. `headers` overrides the stored ones (a form about to save);
    `check_address` resolves the URL's host and refuses a non-public one (unless
    AWAKEN_MCP_ALLOW_PRIVATE); given `warnings`, a host that does not resolve is saved
    with a warning there."""
    errors: dict[str, str] = {}
    if "__" in (server.slug or ""):
        errors["slug"] = "No '__' in the id: it separates the parts of the tools' names."
    if server.transport == McpServer.Transport.HTTP:
        problem = _url_error(
            (server.url or "").strip(), check_address=check_address, warnings=warnings
        )
        if problem:
            errors["url"] = problem
    elif server.transport == McpServer.Transport.STDIO:
        allowed = sorted(stdio_commands())
        if server.command not in allowed:
            errors["command"] = (
                f"'{server.command}' is not an allowed command. Choose one of: "
                f"{', '.join(allowed) or '(none: set AWAKEN_MCP_STDIO_COMMANDS)'}."
            )
    else:
        errors["transport"] = "Choose http (a URL) or stdio (an allowed command)."
    if not server.timeout_seconds or not 0.1 <= server.timeout_seconds <= 3600:
        errors["timeout_seconds"] = "The timeout must be between 0.1 and 3600 seconds."
    if headers is None:
        try:
            headers = server.stored_headers()
            server.token()
        except (SecretError, ValueError) as exc:
            errors["headers"] = f"The stored secrets are unusable: {exc}; enter them again."
            headers = {}
    problem = header_errors(headers)
    if problem:
        errors["headers"] = problem
    return errors


def header_errors(headers: Any) -> str:
    if not isinstance(headers, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        return 'Headers are a JSON object of names to texts, e.g. {"X-Api-Key": "…"}.'
    for name, value in headers.items():
        if not re.fullmatch(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+", name) or "\n" in value or "\r" in value:
            return f"'{name}' is not a valid header (name or value)."
    return ""


def mcp_connection(server: McpServer) -> Connection:
    """The client's connection, secrets decrypted (build it at execution time only)."""
    from agents.mcp.client import Connection  # noqa: PLC0415 (the SDK, on first use)

    headers = dict(server.stored_headers())
    token = server.token()
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return Connection(
        name=server.slug,
        transport=server.transport,
        url=server.url if server.transport == McpServer.Transport.HTTP else "",
        headers=tuple(sorted(headers.items())),
        argv=tuple(stdio_commands().get(server.command) or ())
        if server.transport == McpServer.Transport.STDIO
        else (),
        timeout=float(server.timeout_seconds),
        policy=address_policy(),
    )


# -- the tools of a server -------------------------------------------------------------------


def tool_name(server_slug: str, tool: str) -> str:
    return f"{PREFIX}{server_slug}__{_UNSAFE.sub('_', tool)}"


def tool_entries(server_slug: str, listed: list[Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """(the tools agents may pick, sorted by name; what is not offered and why)."""
    entries: dict[str, dict[str, Any]] = {}
    skipped: list[str] = []
    limit = int(getattr(settings, "AWAKEN_MCP_MAX_SCHEMA_BYTES", 100_000))
    for tool in listed[:MAX_TOOLS]:
        name = tool_name(server_slug, tool.name)
        schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
        size = len(json.dumps(schema, default=str))
        if len(name) > MAX_NAME:
            skipped.append(f"{tool.name}: the name {name} is longer than {MAX_NAME} characters")
        elif name in entries:
            skipped.append(f"{tool.name}: its name clashes with {entries[name]['tool']}")
        elif size > limit:
            skipped.append(f"{tool.name}: its schema is {size} bytes (more than {limit})")
        elif schema.get("type", "object") != "object":
            skipped.append(f"{tool.name}: its input schema is not an object schema")
        else:
            entries[name] = {
                "name": name,
                "tool": tool.name,
                "description": (tool.description or "")[:MAX_DESCRIPTION],
                "input_schema": {"type": "object", **schema},
            }
    if len(listed) > MAX_TOOLS:
        skipped.append(f"{len(listed) - MAX_TOOLS} more tools: at most {MAX_TOOLS} are offered")
    return [entries[name] for name in sorted(entries)], skipped


def tools_diff(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Tools added, removed and changed (description or schema) between two listings."""
    old = {entry["name"]: entry for entry in before}
    new = {entry["name"]: entry for entry in after}
    return {
        "added": sorted(set(new) - set(old)),
        "removed": sorted(set(old) - set(new)),
        "changed": sorted(name for name in set(old) & set(new) if old[name] != new[name]),
    }


@dataclass(frozen=True)
class McpCheckResult:
    ok: bool
    tools: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    changes: dict[str, list[str]] = field(default_factory=dict)
    error: str = ""

    @property
    def summary(self) -> str:
        if not self.ok:
            return f"failing: {self.error}"
        return f"healthy: {len(self.tools)} tools"


def _contact(server: McpServer) -> tuple[list[dict[str, Any]], list[str], str]:
    errors = mcp_server_config_errors(server)
    if errors:
        where, message = next(iter(errors.items()))
        return [], [], f"{where}: {message}"
    from mcp.shared.exceptions import MCPError  # noqa: PLC0415 (the SDK, on first use)

    from agents.mcp.client import (  # noqa: PLC0415
        McpTransportError,
        describe,
        list_tools,
    )

    connection = mcp_connection(server)
    try:
        listed = aio.run(lambda: list_tools(connection), CancellationToken())
    except McpTransportError as exc:
        return [], [], str(exc)
    except MCPError as exc:
        return [], [], f"the server refused tools/list: {exc.error.message}"
    except Exception as exc:  # anything the SDK raises on an answer that is not MCP
        return [], [], f"unexpected answer from {connection.where}: {describe(exc)}"
    entries, skipped = tool_entries(server.slug, list(listed or []))
    return entries, skipped, ""


def mcp_probe(server: McpServer) -> McpCheckResult:
    """List the server's tools the way runs reach it; record its health and, on success,
    its tools and how they changed since the last check (not audited)."""
    at = timezone.now()
    entries, skipped, error = _contact(server)
    mcp_server_health_record(server_id=server.pk, ok=not error, error=error, at=at)
    if error:
        logger.info("MCP server %s check failed: %s", server.slug, error)
        return McpCheckResult(ok=False, error=error)
    changes = tools_diff(list(server.tools or []), entries) if server.tools_checked_at else {}
    McpServer.objects.filter(pk=server.pk).filter(
        Q(tools_checked_at__isnull=True) | Q(tools_checked_at__lte=at)
    ).update(tools=entries, tools_changes=changes, tools_checked_at=at)
    server.refresh_from_db()
    return McpCheckResult(ok=True, tools=entries, skipped=skipped, changes=changes)


def mcp_check(*, server: McpServer, actor: Actor) -> McpCheckResult:
    """An operator's check (admin or API), audited; refused while the team is frozen."""
    ensure_writable(server.team_id)
    result = mcp_probe(server)
    audit_record(
        actor=actor,
        action="mcpserver.check",
        target_type="mcpserver",
        target_id=server.pk,
        team=server.team_id,
        after={
            "health": Health.HEALTHY if result.ok else Health.FAILING,
            "tools": [entry["name"] for entry in result.tools],
            "changes": result.changes,
            "skipped": result.skipped,
            "error": result.error,
        },
    )
    return result


# -- the tools agents take from servers ----------------------------------------------------


def mcp_servers_for_team(team_id: Any) -> list[McpServer]:
    """The servers an agent of `team_id` may use: its team's and the shared ones."""
    return list(McpServer.objects.filter(Q(team__isnull=True) | Q(team_id=team_id)))


def mcp_tools_available(team_id: Any) -> dict[str, dict[str, Any]]:
    """Tool name -> {server, tool, description, input_schema}, from the last checks."""
    found: dict[str, dict[str, Any]] = {}
    for server in mcp_servers_for_team(team_id):
        for entry in server.tools or []:
            found[entry["name"]] = {
                "server": server.slug,
                "tool": entry["tool"],
                "description": entry.get("description", ""),
                "input_schema": entry.get("input_schema") or {"type": "object"},
            }
    return found


def mcp_tool_errors(names: list[str], team_id: Any) -> str:
    """What is wrong with the MCP tools an agent picked ("" when nothing)."""
    wanted = [name for name in names if is_mcp_tool(name)]
    if not wanted:
        return ""
    unknown = sorted(set(wanted) - set(mcp_tools_available(team_id)))
    if not unknown:
        return ""
    return (
        f"Unknown MCP tools: {', '.join(unknown)}. An MCP tool is offered once a check of "
        "its server (under MCP servers, shared or of the agent's team) has listed it."
    )


def mcp_tools_spec(names: list[str], team_id: Any) -> dict[str, dict[str, Any]]:
    """What a published version freezes of its MCP tools (unknown names are left out:
    validation refuses them before anything is published)."""
    wanted = [name for name in names if is_mcp_tool(name)]
    if not wanted:
        return {}
    available = mcp_tools_available(team_id)
    return {name: available[name] for name in sorted(wanted) if name in available}


def mcp_tool_schema(name: str, spec: dict[str, Any] | None) -> dict[str, Any] | None:
    """The input schema a pinned version froze for MCP tool `name`, or None."""
    entry = ((spec or {}).get("mcp_tools") or {}).get(name)
    return entry.get("input_schema") if isinstance(entry, dict) else None


def mcp_tools_for_spec(spec: dict[str, Any]) -> dict[str, McpTool]:
    """The runtime tools of a pinned version's MCP tools, each on the schema it froze; a
    server that is gone or unusable gives tools that fail saying why."""
    frozen: dict[str, dict[str, Any]] = spec.get("mcp_tools") or {}
    if not frozen:
        return {}
    from agents.mcp.tool import McpTool  # noqa: PLC0415 (the SDK, on first use)

    slugs = {entry["server"] for entry in frozen.values()}
    servers = {server.slug: server for server in McpServer.objects.filter(slug__in=slugs)}
    connections: dict[str, tuple[Connection | None, str]] = {}
    for slug in slugs:
        server = servers.get(slug)
        if server is None:
            connections[slug] = (None, f"MCP server '{slug}' no longer exists.")
            continue
        errors = mcp_server_config_errors(server, check_address=False)
        if errors:
            problem = "; ".join(f"{k}: {v}" for k, v in errors.items())
            connections[slug] = (None, f"MCP server '{slug}' is misconfigured: {problem}")
        else:
            connections[slug] = (mcp_connection(server), "")
    limit = int(getattr(settings, "AWAKEN_MCP_MAX_RESULT_CHARS", 100_000))
    reporters = {
        slug: HealthReporter(servers[slug].pk, healthy=servers[slug].health == Health.HEALTHY)
        for slug in slugs
        if slug in servers
    }
    tools: dict[str, McpTool] = {}
    for name, entry in frozen.items():
        connection, unavailable = connections[entry["server"]]
        tools[name] = McpTool(
            name=name,
            server=entry["server"],
            tool=entry["tool"],
            description=entry.get("description", ""),
            input_schema=entry.get("input_schema") or {"type": "object"},
            connection=connection,
            unavailable=unavailable,
            max_chars=limit,
            on_outcome=reporters.get(entry["server"]),
        )
    return tools


class HealthReporter:
    """A run's calls report their transport outcome: a failure marks the server failing
    with its message, the first success after that healthy again (no write per call)."""

    def __init__(self, server_id: Any, *, healthy: bool) -> None:
        self.server_id = server_id
        self.healthy = healthy

    def __call__(self, error: str | None) -> None:
        if error is None and self.healthy:
            return
        mcp_server_health_record(
            server_id=self.server_id, ok=error is None, error=error or "", only_if_changed=True
        )
        self.healthy = error is None
