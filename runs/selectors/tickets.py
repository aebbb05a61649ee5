"""The approvals inbox and the tickets API's lists."""

from __future__ import annotations

from django.db.models import QuerySet

from agents.models import Agent
from runs.models import Ticket
from runs.selectors.base import PAGE_SIZE, Page, agent_id_for_slug, keyset_page


def _tickets_for(tickets: QuerySet[Ticket], agent: str, tool: str) -> QuerySet[Ticket]:
    """The agent and tool filters of the inbox and the tickets API."""
    if agent:
        tickets = tickets.filter(agent_id=agent_id_for_slug(agent))
    if tool:
        tickets = tickets.filter(tool_name=tool)
    return tickets


def inbox_tickets(
    *, agent: str = "", tool: str = "", cursor: str | None = None, size: int = PAGE_SIZE
) -> Page:
    """Pending tickets, oldest first, over the (partial) inbox indexes."""
    tickets = Ticket.objects.for_operators().select_related("run__agent", "tool_call")
    return keyset_page(_tickets_for(tickets, agent, tool), cursor, size, oldest_first=True)


def ticket_list(
    *, status: str, agent: str = "", tool: str = "", cursor: str | None = None, size: int
) -> Page:
    """The API's tickets: pending ones as the inbox lists them, closed ones newest first."""
    if status == Ticket.Status.PENDING:
        return inbox_tickets(agent=agent, tool=tool, cursor=cursor, size=size)
    tickets = Ticket.objects.filter(status=status).select_related(
        "run__agent", "tool_call", "decision"
    )
    return keyset_page(_tickets_for(tickets, agent, tool), cursor, size)


def inbox_count(*, agent: str = "", tool: str = "") -> int:
    return _tickets_for(Ticket.objects.for_operators(), agent, tool).count()


def inbox_filter_options() -> tuple[list[str], list[str]]:
    """The agents and the tools their configuration offers (not a scan of the tickets)."""
    agents: list[str] = []
    tools: set[str] = set()
    for slug, agent_tools in Agent.objects.order_by("slug").values_list("slug", "tools"):
        agents.append(slug)
        tools.update(str(name) for name in agent_tools or [])
    return agents, sorted(tools)
