"""The authorization matrix: one entry per route of the site (tests/access/routes.py).

Each entry says what kind of route it is and how to point it at one team's objects
(tests/access/world.py). tests/access/test_matrix.py checks, for team alpha's operator:

- DETAIL / ACTION: beta's object answers 404 (a method the route does not take may answer
  405, the same as for alpha's object); alpha's own object is allowed (not 403/404, no 5xx).
- LIST (pages, API lists, exports): 200, no marker of beta's objects in the body; with
  `shows`, alpha's object is in it; with `figures` (pages of counts, which name no
  object), the body changes when beta's agent and thread move into alpha's team (so
  beta's runs were not counted before).
- LOOKUP: a query or body naming beta's object is refused (API: 400 or 404; a page may
  answer with its form's error, 200 or a redirect), names nothing of
  beta's and changes nothing; naming alpha's is allowed.
- OWN: an object that belongs to a user (saved view, subscription, token): beta's
  operator's answers 404.
- ADMIN / ADMIN_ACTION: for team alpha's admin (is_staff) in the Django admin: a page
  shows nothing of beta's, beta's row is not shown (no 200), and on alpha's own pages and
  rows the team admin gets the same status as a site-wide admin (the admin refuses some
  views, such as adding a run, to everyone).
- SELF: acts on the caller's own things only (no object of a team in the URL): allowed.
- PUBLIC / FALLBACK / SOCKET / A2A: no per-entry HTTP check here (a reason says why; the
  sockets and A2A have their own tests in test_matrix.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runs.operations.services.email_links import approval_token
from runs.operations.services.slack_links import SlackIdentity, link_url

from .world import Side

PUBLIC, FALLBACK, LIST, DETAIL, ACTION, LOOKUP, OWN = (
    "public",
    "fallback",
    "list",
    "detail",
    "action",
    "lookup",
    "own",
)
ADMIN, ADMIN_ACTION, SOCKET, A2A, SELF = "admin", "admin-action", "socket", "a2a", "self"

Args = Callable[[Side], dict[str, Any]]


@dataclass(frozen=True)
class Entry:
    kind: str
    args: Args | None = None  # URL kwargs for one side's object
    methods: tuple[str, ...] = ("GET",)
    query: Args | None = None  # GET query (LIST, LOOKUP)
    body: Args | None = None  # POST body
    token: bool = False  # an API route: tried with a bearer token as well as the session
    shows: Callable[[Side], str] | None = None  # LIST: alpha's object that must show
    extra: Callable[[Side], list[str]] = field(default=lambda side: [])  # more markers
    alpha_check: bool = True  # False: only beta's side is checked
    figures: bool = False  # LIST of counts: they change when beta's agent joins alpha's team
    may_refuse: bool = False  # ADMIN*: alpha's team admin may get 403 (a site-wide model)
    who: str = "operator"  # "admin": an action of the admin role (alpha's team admin tries it)
    refusals: tuple[int, ...] = ()  # LOOKUP: the statuses that refuse, when not the usual
    variants: tuple[Args, ...] = ()  # more POST bodies, each tried as `body` is (a dry run)
    post: Entry | None = None  # a LIST's POST (it creates): checked as an entry of its own
    reason: str = ""


def checked_entries(key: str) -> list[tuple[str, Entry]]:
    """The entry of a route key and its POST's, if it has one of its own: (label, entry)."""
    entry = entry_for(key)
    if entry is None:
        return []
    return [(key, entry)] + ([(f"{key} POST", entry.post)] if entry.post else [])


def bodies(entry: Entry, method: str) -> list[Args | None]:
    """The bodies a request of `method` is tried with: `body`, then each variant."""
    if method == "GET":
        return [None]
    return [entry.body, *entry.variants]


def run(side: Side) -> dict[str, Any]:
    return {"run_id": side.run.pk}


def ticket(side: Side) -> dict[str, Any]:
    return {"ticket_id": side.ticket.pk}


def thread(side: Side) -> dict[str, Any]:
    return {"thread_id": side.thread.pk}


def pending(side: Side) -> dict[str, Any]:
    return {"input_id": side.input.pk}


def replay(side: Side) -> dict[str, Any]:
    return {"set_id": side.replay.pk}


def failure(side: Side) -> dict[str, Any]:
    return {"group_id": side.failure.pk}


def agent_slug(side: Side) -> list[str]:
    return [side.agent.slug]


def dependencies(side: Side) -> list[str]:
    """The team's agent, provider and endpoint (the dashboard's health panel names them)."""
    return [side.agent.slug, side.provider.slug, side.endpoint.slug]


def provider_slug(side: Side) -> str:
    return side.provider.slug


def slack_link_token(side: Side) -> str:
    return link_url(SlackIdentity("T1", f"U-new-{side.slug}")).rsplit("/", 1)[1]


def none(side: Side) -> dict[str, Any]:
    return {}


def run_id_str(side: Side) -> str:
    return str(side.run.pk)


def ticket_id_str(side: Side) -> str:
    return str(side.ticket.pk)


def thread_id_str(side: Side) -> str:
    return str(side.thread.pk)


def schedule(side: Side) -> dict[str, Any]:
    return {"schedule_id": side.schedule.pk}


def schedule_body(side: Side) -> dict[str, Any]:
    return {
        "name": f"matrix {side.slug} schedule",
        "agent": side.agent.pk,
        "message": "report",
        "kind": "interval",
        "interval_seconds": "600",
        "timezone": "UTC",
        "thread_policy": "new",
        "catch_up": "skip",
        "priority": "128",
        "enabled": "on",
    }


def api_schedule_body(side: Side) -> dict[str, Any]:
    return {
        "name": f"matrix {side.slug} api schedule",
        "agent_id": side.agent.slug,
        "message": "report",
        "kind": "interval",
        "interval_seconds": 600,
    }


def route(side: Side) -> dict[str, Any]:
    return {"rule_id": side.rule.pk}


def channel(side: Side) -> dict[str, Any]:
    return {"channel_id": side.rule.channel_id}


CHANNELS = (
    "channels belong to no team: site-wide admins only, everyone else 403 "
    "(tests/runs/test_config_pages.py)"
)


def route_row(side: Side) -> str:
    return f'data-route="{side.rule.pk}"'


def route_body(side: Side) -> dict[str, Any]:
    return {"channel": side.rule.channel_id, "agent": side.agent.pk, "enabled": "on"}


def budget(side: Side) -> dict[str, Any]:
    return {"budget_id": side.budget.pk}


def budget_team(side: Side) -> str:
    return f'"team":"{side.team.slug}"'


def team_slug(side: Side) -> dict[str, Any]:
    return {"slug": side.team.slug}


def member(side: Side) -> dict[str, Any]:
    return {"slug": side.team.slug, "username": side.operator.username}


def member_body(side: Side) -> dict[str, Any]:
    return {"username": side.operator.username, "role": "viewer"}


def reason(side: Side) -> dict[str, Any]:
    return {"reason": "matrix check"}


def team_link(side: Side) -> str:
    return f"/teams/{side.team.slug}/"


def team_json(side: Side) -> str:
    return f'"slug":"{side.team.slug}"'  # DRF's compact JSON


def _page(
    kind: str, args: Args | None = None, methods: tuple[str, ...] = ("GET",), **kw: Any
) -> Entry:
    return Entry(kind, args, methods, **kw)


def _api(
    kind: str, args: Args | None = None, methods: tuple[str, ...] = ("GET",), **kw: Any
) -> Entry:
    return Entry(kind, args, methods, token=True, **kw)


POST = ("POST",)
GET_POST = ("GET", "POST")
API_DETAIL = ("GET", "POST", "PATCH", "PUT", "DELETE")

ENTRIES: dict[str, Entry] = {
    # --- public and fallback routes ----------------------------------------------------
    "favicon": _page(PUBLIC, reason="a redirect to a static file"),
    "login": _page(PUBLIC, reason="the sign-in form"),
    "oidc_authentication_init": _page(PUBLIC, reason="starts single sign-on; names no object"),
    "oidc_authentication_callback": _page(PUBLIC, reason="the identity provider's answer"),
    "logout": _page(PUBLIC, reason="signs the caller out; names no object"),
    "healthz": _page(PUBLIC, reason="liveness probe; names no object"),
    "runs:slack-actions": _page(
        PUBLIC, reason="Slack's signed requests (tests/test_slack_approvals.py); no session"
    ),
    "readyz": _page(PUBLIC, reason="readiness probe; names no object"),
    "metrics": _page(PUBLIC, reason="Prometheus figures, site-wide, behind its own token"),
    "api-schema": _page(PUBLIC, reason="the OpenAPI schema; names no object"),
    "api-docs": _page(PUBLIC, reason="the API docs page; names no object"),
    "re:api/v1/^[\\s\\S]*$": _page(FALLBACK, reason="the API's JSON 404 for unknown paths"),
    "re:admin/(?P<url>.*)$": _page(FALLBACK, reason="the admin's catch-all (login or 404)"),
    "re:^admin/runs/(?P<model>auditentry|apitoken)/(?P<rest>.*)$": _page(
        FALLBACK, reason="old admin links, a redirect to the common app's admin (checked there)"
    ),
    "re:^admin/runs/(?P<model>replayset|replayitem|failuregroup|failuregrouprun"
    "|notification(?:channel|circuit|delivery|rule|subscription)|savedview)/(?P<rest>.*)$": _page(
        FALLBACK, reason="old admin links, a redirect to the domain apps' admin (checked there)"
    ),
    "admin:login": _page(PUBLIC, reason="the admin's sign-in form"),
    "admin:logout": _page(PUBLIC, reason="signs the caller out"),
    "admin:jsi18n": _page(PUBLIC, reason="translation catalogue for the admin's scripts"),
    "admin:password_change": _page(PUBLIC, reason="changes the caller's own password"),
    "admin:password_change_done": _page(PUBLIC, reason="a confirmation page, no object"),
    "admin:auth_user_password_change": _page(
        ADMIN_ACTION, lambda side: {"id": side.operator.pk}, GET_POST, alpha_check=False
    ),
    # --- pages: lists ---------------------------------------------------------------------
    "runs:dashboard": _page(LIST, extra=dependencies, shows=provider_slug, figures=True),
    "runs:dashboard-stats": _page(LIST, extra=dependencies, shows=provider_slug, figures=True),
    "runs:dashboard-glance": _page(LIST, extra=agent_slug, figures=True),
    "runs:run-list": _page(LIST, shows=run_id_str),
    "runs:run-list-export": _page(LIST, shows=run_id_str),
    "runs:thread-list": _page(LIST, shows=thread_id_str),
    "runs:inbox": _page(LIST, shows=ticket_id_str),
    "runs:inbox-list": _page(LIST, shows=ticket_id_str),
    "runs:audit": _page(LIST, shows=lambda side: side.audit.action),
    "runs:audit-export": _page(LIST, shows=lambda side: side.audit.action),
    "runs:tokens": _page(LIST),
    "runs:notifications": _page(LIST),
    "runs:replays": _page(LIST, shows=lambda side: str(side.replay.pk)),
    "runs:failures": _page(
        LIST, query=lambda side: {"state": "all"}, shows=lambda side: str(side.failure.pk)
    ),
    "runs:run-compare": _page(LOOKUP, query=lambda side: {"a": side.run.pk, "b": side.run.pk}),
    "runs:replay-preview": _page(LOOKUP, query=lambda side: {"agent_id": side.agent.slug}),
    # --- pages: one run, ticket, thread, input, replay ------------------------------------
    "runs:run-export": _page(DETAIL, run),
    "runs:run-detail": _page(DETAIL, run),
    "runs:run-row": _page(DETAIL, run),
    "runs:run-header": _page(DETAIL, run),
    "runs:run-tickets": _page(DETAIL, run),
    "runs:run-transcript": _page(DETAIL, run),
    "runs:run-timeline": _page(DETAIL, run),
    "runs:run-trace": _page(DETAIL, run),
    "runs:run-trace-events": _page(DETAIL, run),
    "runs:run-fork-form": _page(DETAIL, run),
    "runs:run-cancel": _page(ACTION, run, POST),
    "runs:run-retry": _page(ACTION, run, POST),
    "runs:run-fork": _page(ACTION, run, POST),
    "runs:run-priority": _page(ACTION, run, POST, body=lambda side: {"priority": "1"}),
    "runs:ticket-decide": _page(ACTION, ticket, POST),
    "runs:inbox-decide": _page(ACTION, ticket, POST, body=lambda side: {"action": "approve"}),
    "runs:ticket-edit-preview": _page(ACTION, ticket, GET_POST),
    "runs:ticket-claim": _page(ACTION, ticket, POST),
    "runs:ticket-release": _page(ACTION, ticket, POST),
    "runs:ticket-assign": _page(ACTION, ticket, POST),
    "runs:ticket-rule": _page(ACTION, ticket, GET_POST, who="admin"),
    "runs:thread-detail": _page(DETAIL, thread),
    "runs:thread-messages": _page(DETAIL, thread),
    "runs:thread-inputs": _page(DETAIL, thread),
    "runs:thread-runs": _page(DETAIL, thread),
    "runs:thread-transcript": _page(DETAIL, thread),
    "runs:thread-send": _page(ACTION, thread, POST, body=lambda side: {"message": "hi"}),
    "runs:thread-interrupt": _page(ACTION, thread, POST),
    "runs:thread-new": _page(
        LOOKUP, none, POST, body=lambda side: {"agent": side.agent.slug, "message": "hi"}
    ),
    "runs:input-edit": _page(ACTION, pending, POST),
    "runs:input-retract": _page(ACTION, pending, POST),
    "runs:inbox-bulk": _page(
        LOOKUP, none, POST, body=lambda side: {"ticket": [side.ticket.pk], "action": "approve"}
    ),
    "runs:inbox-policy": _page(
        LOOKUP, none, POST, body=lambda side: {"ticket": [side.ticket.pk], "action": "approve"}
    ),
    "runs:run-bulk": _page(  # per-run outcomes: beta's run is "no such run", nothing done
        LOOKUP, none, POST, body=lambda side: {"run": [side.run.pk], "action": "cancel"}
    ),
    "runs:replay-detail": _page(DETAIL, replay),
    "runs:replay-table": _page(DETAIL, replay),
    "runs:replay-cancel": _page(ACTION, replay, POST, who="admin"),
    "runs:failure-state": _page(ACTION, failure, POST, body=lambda side: {"action": "ignore"}),
    # --- pages: a user's own objects ------------------------------------------------------
    "runs:saved-view-save": _page(
        SELF,
        lambda side: {"page": "runs"},
        POST,
        body=lambda side: {"name": "x"},
        reason="saves the caller's own view; names no other object",
    ),
    "runs:time-display": _page(
        SELF,
        none,
        POST,
        body=lambda side: {"time_display": "utc"},
        reason="sets the caller's own time display; names no other object",
    ),
    "runs:saved-view-delete": _page(OWN, lambda side: {"view_id": side.saved_view.pk}, POST),
    "runs:notification-unsubscribe": _page(
        OWN, lambda side: {"subscription_id": side.subscription.pk}, POST
    ),
    "runs:slack-unlink": _page(OWN, lambda side: {"link_id": side.slack_link.pk}, POST),
    "runs:slack-link": _page(
        SELF,
        lambda side: {"token": slack_link_token(side)},
        reason="offers to link a Slack user to the caller; names no object of a team",
    ),
    "runs:email-approval": _page(
        DETAIL, lambda side: {"token": approval_token(side.ticket.pk, "approve")}
    ),
    "runs:token-revoke": _page(OWN, lambda side: {"token_id": side.token_id}, POST),
    # --- API: lists and exports -----------------------------------------------------------
    "api-runs": _api(
        LIST,
        shows=run_id_str,
        post=_api(
            LOOKUP,
            none,
            POST,
            body=lambda side: {
                "agent_id": side.agent.slug,
                "messages": [{"role": "user", "content": "hi"}],
            },
        ),
    ),
    "api-runs-export": _api(LIST, shows=run_id_str),
    "api-tickets": _api(LIST, shows=ticket_id_str),
    "api-threads": _api(
        LIST,
        shows=thread_id_str,
        post=_api(LOOKUP, none, POST, body=lambda side: {"team": side.team.slug, "title": "t"}),
    ),
    "api-agents": _api(LIST, extra=agent_slug, shows=lambda side: side.agent.slug),
    "api-endpoints": _api(
        LIST, extra=lambda side: [side.endpoint.slug], shows=lambda side: side.endpoint.slug
    ),
    "api-mcp-servers": _api(
        LIST, extra=lambda side: [side.mcp_server.slug], shows=lambda side: side.mcp_server.slug
    ),
    "api-stats": _api(LIST, extra=agent_slug, figures=True),
    "api-budgets": _api(
        LIST,
        shows=budget_team,
        extra=lambda side: [budget_team(side)],
        post=_api(
            LOOKUP,
            none,
            POST,
            body=lambda side: {"team": side.team.slug, "period": "month", "token_limit": 5},
            who="admin",
        ),
    ),
    "api-budget": _api(DETAIL, budget, ("GET", "PATCH", "DELETE"), who="admin"),
    "api-audit": _api(LIST, shows=lambda side: side.audit.action),
    "api-audit-export": _api(LIST, shows=lambda side: side.audit.action),
    "api-saved-views": _api(LIST, extra=lambda side: [side.saved_view.name]),
    "api-replays": _api(
        LIST,
        shows=lambda side: str(side.replay.pk),
        post=_api(
            LOOKUP,
            none,
            POST,
            body=lambda side: {"agent_id": side.agent.slug},
            # another team's agent is refused before the rest of the body is read
            variants=(lambda side: {"agent_id": side.agent.slug, "limit": 0},),
            who="admin",
        ),
    ),
    "api-runs-compare": _api(LOOKUP, query=lambda side: {"a": side.run.pk, "b": side.run.pk}),
    "api-tickets-bulk-decision": _api(
        LOOKUP,
        none,
        POST,
        body=lambda side: {"ticket_ids": [str(side.ticket.pk)], "action": "approve"},
        variants=(  # the preview names beta's ticket as it would an unknown one: not at all
            lambda side: {
                "ticket_ids": [str(side.ticket.pk)],
                "action": "approve",
                "dry_run": True,
            },
        ),
        refusals=(200,),  # per-ticket outcomes: beta's is "no such ticket", nothing decided
    ),
    "api-runs-bulk-action": _api(
        LOOKUP,
        none,
        POST,
        body=lambda side: {"run_ids": [str(side.run.pk)], "action": "cancel"},
        refusals=(200,),  # per-run outcomes: beta's is "no such run", nothing cancelled
    ),
    # --- API: one object ------------------------------------------------------------------
    "api-run": _api(DETAIL, lambda side: {"run_id": side.run.pk}, API_DETAIL),
    "api-run-export": _api(DETAIL, run),
    "api-run-cancel": _api(ACTION, run, POST),
    "api-run-retry": _api(ACTION, run, POST),
    "api-run-fork": _api(ACTION, run, POST),
    "api-run-forks": _api(DETAIL, run),
    "api-run-events": _api(DETAIL, run),
    "api-run-events-stream": _api(DETAIL, run, reason="SSE: see also the stream test"),
    "api-run-decisions": _api(ACTION, run, POST),
    "api-run-inputs": _api(DETAIL, run, GET_POST),
    "api-run-priority": _api(ACTION, run, POST, body=lambda side: {"priority": 1}),
    "api-ticket": _api(DETAIL, ticket),
    "api-ticket-decision": _api(ACTION, ticket, POST),
    "api-ticket-claim": _api(ACTION, ticket, ("POST", "DELETE")),
    "api-ticket-assign": _api(ACTION, ticket, POST),
    "api-ticket-rule-proposal": _api(ACTION, ticket, GET_POST, who="admin"),
    "api-thread": _api(DETAIL, thread),
    "api-thread-messages": _api(ACTION, thread, GET_POST),
    "api-thread-inputs": _api(DETAIL, thread, GET_POST),
    "api-thread-interrupt": _api(ACTION, thread, POST),
    "api-input": _api(DETAIL, pending, ("GET", "PATCH", "DELETE")),
    "api-agent": _api(DETAIL, lambda side: {"agent_id": side.agent.slug}, API_DETAIL),
    "api-agent-ag-ui": _api(
        ACTION,
        lambda side: {"agent_id": side.agent.slug},
        POST,
        body=lambda side: {
            "threadId": str(side.thread.pk),
            "runId": "matrix",
            "messages": [{"id": "u1", "role": "user", "content": "hi"}],
        },
        reason="AG-UI stream (not read here); another team's thread: tests/api/test_agui.py",
    ),
    "api-endpoint": _api(DETAIL, lambda side: {"endpoint_id": side.endpoint.slug}, API_DETAIL),
    "api-mcp-server": _api(DETAIL, lambda side: {"server_id": side.mcp_server.slug}, API_DETAIL),
    "api-mcp-server-check": _api(
        ACTION, lambda side: {"server_id": side.mcp_server.slug}, POST, who="admin"
    ),
    "api-endpoint-check": _api(
        ACTION, lambda side: {"endpoint_id": side.endpoint.slug}, POST, who="admin"
    ),
    "api-saved-view": _api(OWN, lambda side: {"view_id": side.saved_view.pk}, API_DETAIL),
    "api-replay": _api(DETAIL, replay),
    "api-replay-cancel": _api(ACTION, replay, POST, who="admin"),
    # --- schedules and notification routes: pages ------------------------------------------
    "runs:schedules": _page(LIST, shows=lambda side: side.schedule.name),
    # (operators create, change, pause, resume and run now their teams' schedules; deleting
    # one is an admin's)
    "runs:schedule-new": _page(LOOKUP, none, GET_POST, body=schedule_body),
    "runs:schedule-detail": _page(DETAIL, schedule),
    "runs:schedule-edit": _page(ACTION, schedule, GET_POST, body=schedule_body),
    "runs:schedule-pause": _page(ACTION, schedule, POST),
    "runs:schedule-resume": _page(ACTION, schedule, POST),
    "runs:schedule-run-now": _page(ACTION, schedule, POST),
    "runs:schedule-delete": _page(ACTION, schedule, POST, who="admin"),
    # --- schedules: API ---------------------------------------------------------------------
    "api-schedules": _api(
        LIST,
        shows=lambda side: side.schedule.name,
        post=_api(LOOKUP, none, POST, body=api_schedule_body),
    ),
    "api-schedule": _api(  # the admin's: its DELETE (an operator's PATCH: test_schedules_api)
        DETAIL, schedule, API_DETAIL, body=lambda side: {"priority": 7}, who="admin"
    ),
    "api-schedule-pause": _api(ACTION, schedule, POST),
    "api-schedule-resume": _api(ACTION, schedule, POST),
    "api-schedule-run-now": _api(ACTION, schedule, POST),
    "api-schedule-runs": _api(DETAIL, schedule),
    "runs:notification-routes": _page(LIST, extra=lambda side: [route_row(side)], shows=route_row),
    "runs:notification-route-new": _page(LOOKUP, none, GET_POST, body=route_body, who="admin"),
    "runs:notification-route-edit": _page(ACTION, route, GET_POST, body=route_body, who="admin"),
    "runs:notification-route-delete": _page(ACTION, route, POST, who="admin"),
    "runs:notification-channel-new": _page(
        SELF, none, GET_POST, alpha_check=False, reason=CHANNELS
    ),
    "runs:notification-channel-edit": _page(
        SELF, channel, GET_POST, alpha_check=False, reason=CHANNELS
    ),
    "runs:notification-channel-delete": _page(
        SELF, channel, POST, alpha_check=False, reason=CHANNELS
    ),
    # --- teams: pages and API -------------------------------------------------------------
    "runs:teams": _page(LIST, extra=lambda side: [team_link(side)], shows=team_link),
    "runs:team-detail": _page(DETAIL, team_slug),
    "runs:team-settings": _page(ACTION, team_slug, GET_POST, who="admin"),
    "runs:team-freeze": _page(ACTION, team_slug, POST, body=reason, who="admin"),
    "runs:team-unfreeze": _page(ACTION, team_slug, POST, who="admin"),
    "runs:team-member-set": _page(ACTION, team_slug, POST, body=member_body, who="admin"),
    "runs:team-member-remove": _page(ACTION, member, POST, who="admin"),
    "api-teams": _api(LIST, extra=lambda side: [team_json(side)], shows=team_json),
    "api-team": _api(DETAIL, team_slug, ("GET", "PATCH", "PUT", "DELETE"), who="admin"),
    "api-team-freeze": _api(ACTION, team_slug, POST, body=reason, who="admin"),
    "api-team-unfreeze": _api(ACTION, team_slug, POST, who="admin"),
    "api-team-members": _api(DETAIL, team_slug, GET_POST, body=member_body, who="admin"),
    "api-team-member": _api(DETAIL, member, ("GET", "PUT", "PATCH", "DELETE"), who="admin"),
    # --- sockets --------------------------------------------------------------------------
    "ws:ws/runs/<str:run_id>/": _page(SOCKET, reason="test_run_socket_of_another_team_closes"),
    "ws:ws/dashboard/": _page(SOCKET, reason="test_dashboard_socket_hears_only_its_team"),
    # --- admin: site pages and the custom views -------------------------------------------
    "admin:index": _page(ADMIN),
    "admin:autocomplete": _page(
        PUBLIC, reason="answers only with a registered field's app/model/field_name query"
    ),
    "admin:view_on_site": _page(
        FALLBACK,
        reason="Django's shortcut: a redirect to the object's own page (checked there); "
        "no model of ours has one",
    ),
    "admin:app_list": _page(ADMIN, lambda side: {"app_label": "runs"}),
    "admin:agents_agent_validate": _page(ADMIN_ACTION, lambda side: {"pk": side.agent.pk}, POST),
    "admin:agents_agent_publish": _page(ADMIN_ACTION, lambda side: {"pk": side.agent.pk}, GET_POST),
    "admin:agents_agent_versions": _page(ADMIN_ACTION, lambda side: {"pk": side.agent.pk}),
    "admin:agents_agent_draft_diff": _page(ADMIN_ACTION, lambda side: {"pk": side.agent.pk}),
    "admin:agents_agent_version_diff": _page(
        ADMIN_ACTION, lambda side: {"pk": side.agent.pk, "number": 1}
    ),
    "admin:agents_agent_restore": _page(
        ADMIN_ACTION, lambda side: {"pk": side.agent.pk, "number": 1}, GET_POST
    ),
    "admin:agents_agent_permissions": _page(ADMIN_ACTION, lambda side: {"pk": side.agent.pk}),
    "admin:agents_remoteendpoint_check_health": _page(
        ADMIN_ACTION, lambda side: {"object_id": side.endpoint.pk}, POST
    ),
    "admin:agents_mcpserver_check": _page(
        ADMIN_ACTION, lambda side: {"object_id": side.mcp_server.pk}, POST
    ),
    "admin:agents_modelprovider_test_connection": _page(
        ADMIN_ACTION, lambda side: {"object_id": side.provider.pk}, POST
    ),
    "admin:runs_schedule_run_now": _page(
        ADMIN_ACTION, lambda side: {"object_id": side.schedule.pk}, POST
    ),
}


# --- the admin's generated routes, one rule per registered model ---------------------------

# model (app_label.model_name) -> its row of one side, for change/delete/history; models
# with no row per team are checked on their changelist only.
ADMIN_ROWS: dict[str, Callable[[Side], Any]] = {
    "agents.agent": lambda side: side.agent,
    "agents.remoteendpoint": lambda side: side.endpoint,
    "agents.mcpserver": lambda side: side.mcp_server,
    "agents.modelprovider": lambda side: side.provider,
    "runs.thread": lambda side: side.thread,
    "runs.message": lambda side: side.thread.messages.order_by("pk").first(),
    "runs.run": lambda side: side.run,
    "runs.toolcall": lambda side: side.run.tool_calls.order_by("pk").first(),
    "runs.ticket": lambda side: side.ticket,
    "runs.runevent": lambda side: side.run.events.order_by("seq").first(),
    "runs.schedule": lambda side: side.schedule,
    "operations.notificationsubscription": lambda side: side.subscription,
    "operations.budget": lambda side: side.budget,
    "auth.user": lambda side: side.operator,
    "common.auditentry": lambda side: side.audit,
    "common.team": lambda side: side.team,
}
# models with no team (accounts and site-wide configuration): a team admin may be refused
# them (403) instead of answering as a site-wide admin; they still show nothing of beta's
ADMIN_SITE_WIDE = {
    "auth.user",
    "auth.group",
    "agents.model",
    "operations.notificationchannel",
    "operations.notificationrule",
    "operations.notificationdelivery",
    "common.team",  # a team's own settings have pages of their own (/teams/<slug>/)
}
ADMIN_SUFFIXES = ("changelist", "add", "change", "delete", "history")
ADMIN_ROUTE = re.compile(r"^admin:(?P<app>[a-z]+)_(?P<model>[a-z0-9]+)_(?P<view>[a-z_]+)$")
ADMIN_REDIRECT = re.compile(r"^re:admin/(?P<app>[a-z]+)/(?P<model>[a-z0-9]+)/<path:object_id>/$")


def registered_models() -> set[str]:
    from django.contrib import admin

    return {f"{m._meta.app_label}.{m._meta.model_name}" for m in admin.site._registry}


def admin_rule(key: str) -> Entry | None:
    """The generated entry of an admin route of a registered model's standard views (and
    the admin's old `<object_id>/` redirect to its change page)."""
    models = registered_models()
    match = ADMIN_ROUTE.match(key)
    if match and match["view"] in ADMIN_SUFFIXES:
        model = f"{match['app']}.{match['model']}"
        if model not in models:
            return None
        refuse = model in ADMIN_SITE_WIDE
        if match["view"] in ("changelist", "add"):
            return Entry(ADMIN, extra=agent_slug, may_refuse=refuse)
        return Entry(ADMIN_ACTION, _admin_object(model), may_refuse=refuse)
    match = ADMIN_REDIRECT.match(key)
    model = f"{match['app']}.{match['model']}" if match else ""
    if model in models:
        return Entry(ADMIN_ACTION, _admin_object(model), may_refuse=model in ADMIN_SITE_WIDE)
    return None


def _admin_object(model: str) -> Args | None:
    row = ADMIN_ROWS.get(model)
    if row is None:
        return None
    return lambda side: {"object_id": row(side).pk}


def entry_for(key: str) -> Entry | None:
    return ENTRIES.get(key) or admin_rule(key) or _a2a_entry(key)


def _a2a_entry(key: str) -> Entry | None:
    if not key.startswith("a2a:"):
        return None
    path = key.split(" ", 1)[1]
    if path in A2A_PUBLIC:
        return Entry(PUBLIC, reason="A2A agent cards and directory (AWAKEN_A2A_PUBLIC_CARDS)")
    if path.startswith("/a2a/{agent}/"):
        return Entry(A2A, reason="test_a2a_task_of_another_team_is_not_found")
    return None


A2A_PUBLIC = {
    "/.well-known/agent-card.json",
    "/a2a/",
    "/a2a",
    "/a2a/{agent}/.well-known/agent-card.json",
    "/a2a/.well-known/agent-card.json",
}


def missing_and_stale(keys: list[str]) -> tuple[list[str], list[str]]:
    """Routes without an entry, and explicit entries without a route."""
    missing = sorted(key for key in keys if entry_for(key) is None)
    stale = sorted(set(ENTRIES) - set(keys))
    return missing, stale
