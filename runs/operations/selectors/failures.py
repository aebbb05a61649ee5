"""Failure groups as the pages read them: the failure groups page (a keyset page by last
occurrence, one state at a time), the dashboard's "Recent failures" and the runs list's
`failure_group` filter (FailureGroupScope). Groups are few
(one per kind of failure and team), their agents read in one query per page."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from agents.models import Agent
from runs.models import Run
from runs.operations.models.failures import FailureGroup, FailureGroupRun
from runs.selectors.base import Page, keyset_by, uuid_or_none

GROUPS_PAGE = 50
STATES = ("open", "resolved", "ignored", "all")  # what the page's state filter offers
DASHBOARD_GROUPS = 8


def failure_groups(teams: Collection[int] | None, state: str = "open") -> QuerySet[FailureGroup]:
    """The groups of `teams` (None: every team) in `state` ("all": any)."""
    groups = FailureGroup.objects.select_related("team", "state_changed_by")
    if teams is not None:
        groups = groups.filter(team_id__in=list(teams))
    if state and state != "all":
        groups = groups.filter(state=state)
    return groups


def failure_group_page(
    teams: Collection[int] | None, state: str, cursor: str | None, size: int = GROUPS_PAGE
) -> Page:
    """Latest occurrence first, by (last_seen, id)."""
    page = keyset_by(failure_groups(teams, state), "last_seen", cursor, size, ascending=False)
    with_agents(page.items)
    return page


def recent_failure_groups(
    teams: Collection[int] | None, size: int = DASHBOARD_GROUPS
) -> list[FailureGroup]:
    """The dashboard's: the open groups that failed last (ignored and resolved ones are
    left out: someone decided about them)."""
    groups = list(failure_groups(teams, "open").order_by("-last_seen", "-id")[:size])
    with_agents(groups)
    return groups


def with_agents(groups: Iterable[FailureGroup]) -> None:
    """Set `agents` on each group: its affected agents' (slug, name), in one query."""
    groups = list(groups)
    ids = {agent_id for group in groups for agent_id in group.agent_ids or []}
    names: dict[Any, tuple[str, str]] = {}
    if ids:
        names = {
            pk: (slug, name)
            for pk, slug, name in Agent.objects.filter(pk__in=ids).values_list("pk", "slug", "name")
        }
    for group in groups:
        group.agents = [names[a] for a in group.agent_ids or [] if a in names]  # type: ignore[attr-defined]


@dataclass(frozen=True)
class FailureGroupScope:
    """The runs list's `failure_group` filter (runs.selectors.runs.RunScope, declared in
    AWAKEN_RUN_LIST_SCOPES): the runs linked to the group."""

    group: str

    def narrow(self, runs: QuerySet[Run]) -> QuerySet[Run]:
        """Its links, by (group, created_at)."""
        linked = FailureGroupRun.objects.filter(group_id=uuid_or_none(self.group))
        return runs.filter(pk__in=linked.values("run_id"))

    def page(self, runs: QuerySet[Run], cursor: str | None, size: int) -> Page:
        return group_runs_page(runs, self.group, cursor, size)


def group_runs_page(runs: QuerySet[Run], group: str, cursor: str | None, size: int) -> Page:
    """A page of the runs list filtered to a failure group: the page is read from the
    group's links by (group, created_at, run id), newest first (the links copy each run's
    creation time, so their cursors are the runs list's), then those runs from `runs` by
    id. Scanning the runs newest first for the group's instead would read thousands of
    rows per page for a group of a few thousand runs at a million."""
    links = FailureGroupRun.objects.filter(group_id=uuid_or_none(group))
    page = keyset_by(links, "created_at", cursor, size, ascending=False)
    ids = [link.run_id for link in page.items]
    found = {run.pk: run for run in runs.filter(pk__in=ids)} if ids else {}
    page.items = [found[run_id] for run_id in ids if run_id in found]
    return page
