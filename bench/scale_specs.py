"""What the scale benchmark requests: the database a request runs on with its two clients
(`Target`), and every page and API list to measure (`Spec`): the dashboard, the runs list
with each filter and each pair of filters, deep pages, the other lists and the big objects.

Django and the application are imported inside the functions: they need django.setup(),
which runs after the environment is set (see bench/scale_setup.py)."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations
from typing import Any
from urllib.parse import urlencode

from bench import scale_data
from bench.scale_setup import use_database

HOST = "127.0.0.1"
DEEP_PAGES = 50
TICKET_PAGES = 10


@dataclass
class Target:
    """One database and the two clients that read it (session, token)."""

    label: str
    db: str
    loaded: scale_data.Loaded | None
    ui: Any = None
    api: Any = None

    def connect(self) -> None:
        from django.contrib.auth import get_user_model
        from django.test import Client

        from common.api.tokens import token_create
        from common.audit import Actor

        use_database(self.db)
        user = get_user_model().objects.get(username=scale_data.ADMIN)
        self.ui = Client(HTTP_HOST=HOST)
        self.ui.force_login(user)
        _, raw = token_create(
            user=user,
            name=f"bench-scale-{uuid.uuid4().hex[:8]}",
            actor=Actor(label="bench", source="cli"),
        )
        self.api = Client(HTTP_HOST=HOST, HTTP_AUTHORIZATION=f"Bearer {raw}")

    @property
    def fixtures(self) -> dict[str, str]:
        return self.loaded.fixtures if self.loaded else {}


@dataclass
class Spec:
    name: str
    api: bool
    path: Callable[[Target], str | None]  # None: not offered (see `missing`)
    deep: int = 0  # follow the next cursor this many pages first
    missing: str = ""


def with_query(path: str, params: dict[str, str]) -> str:
    return f"{path}?{urlencode(params)}" if params else path


UI_FILTERS = ("status", "waiting_reason", "agent", "thread", "range", "reason", "provider")
UI_FILTERS += ("endpoint", "q")
# API query parameter for each runs-list filter, first match in the serializer wins
API_NAMES = {
    "status": ("status",),
    "waiting_reason": ("waiting_reason",),
    "agent": ("agent_id", "agent"),
    "thread": ("thread_id", "thread"),
    "since": ("created_after", "since"),
    "until": ("created_before", "until"),
    "reason": ("reason", "status_reason"),
    "provider": ("provider", "provider_id"),
    "endpoint": ("endpoint", "endpoint_id"),
    "q": ("q",),
}


def filter_values(target: Target, kind: str, *, api: bool) -> dict[str, str]:
    """UI parameter -> value for one filter of the runs list."""
    fixtures = target.fixtures
    t0 = target.loaded.t0 if target.loaded else dt.datetime.now(dt.UTC)

    def when(moment: dt.datetime) -> str:
        return moment.isoformat() if api else moment.strftime("%Y-%m-%dT%H:%M")

    return {
        "status": {"status": "waiting"},
        "waiting_reason": {"waiting_reason": "tool_permission"},
        "agent": {"agent": scale_data.FILTER_AGENT},
        "thread": {"thread": fixtures.get("filter_thread", "")},
        "range": {
            "since": when(t0 - dt.timedelta(days=30)),
            "until": when(t0 - dt.timedelta(days=23)),
        },
        "reason": {"reason": "error"},
        "provider": {"provider": scale_data.PROVIDER_OPENAI},
        "endpoint": {"endpoint": scale_data.ENDPOINT},
        "q": {"q": scale_data.COMMON_WORD},
        "q_rare": {"q": scale_data.RARE_WORD},
        "q_none": {"q": scale_data.ABSENT_WORD},
    }[kind]


def api_run_params() -> dict[str, str]:
    """UI filter parameter -> the API's name for it, for those the API offers."""
    from runs.api.request_serializers import RunListQuerySerializer

    offered = set(RunListQuerySerializer().fields)
    names = {}
    for ui_name, candidates in API_NAMES.items():
        for candidate in candidates:
            if candidate in offered:
                names[ui_name] = candidate
                break
    return names


def runs_spec(kinds: tuple[str, ...], api: bool, api_names: dict[str, str]) -> Spec:
    """The runs list (page or API) with the filters `kinds`; on the API, not offered when
    it lacks one of them."""
    words = {"q_rare": scale_data.RARE_WORD, "q_none": scale_data.ABSENT_WORD}
    label = "+".join(f"q {words[k]}" if k in words else k for k in kinds)
    base = "/api/v1/runs" if api else "/runs/"
    missing = []
    if api:
        for kind in kinds:
            params = filter_values(Target("", "", None), kind, api=api)
            missing += [p for p in params if p not in api_names]

    def path(target: Target) -> str | None:
        params: dict[str, str] = {}
        for kind in kinds:
            params.update(filter_values(target, kind, api=api))
        if api:
            if any(name not in api_names for name in params):
                return None
            params = {api_names[name]: value for name, value in params.items()}
        return with_query(base, params)

    return Spec(
        f"{base} [{label}]",
        api,
        path,
        missing=f"the API has no {', '.join(sorted(set(missing)))} filter" if missing else "",
    )


def fixed(name: str, api: bool, path: str, deep: int = 0) -> Spec:
    return Spec(name, api, lambda _t: path, deep=deep)


def runs_filter_specs(api: bool, api_names: dict[str, str]) -> list[Spec]:
    """Each filter alone (and the two other searches), then each pair of filters."""
    singles = [runs_spec((kind,), api, api_names) for kind in (*UI_FILTERS, "q_rare", "q_none")]
    return singles + [runs_spec(pair, api, api_names) for pair in combinations(UI_FILTERS, 2)]


def largest_failure_group() -> str | None:
    """The runs list filtered to the failure group with the most runs (None: no groups)."""
    from runs.operations.models.failures import FailureGroup

    group = FailureGroup.objects.order_by("-count").values_list("pk", flat=True).first()
    return None if group is None else f"/runs/?failure_group={group}"


def ui_list_specs() -> list[Spec]:
    """The other pages: the inbox, the audit log and threads lists, the big objects, the
    admin change lists of tickets and audit entries."""
    return [
        fixed("/inbox/", False, "/inbox/"),
        fixed("/audit/", False, "/audit/"),
        fixed(f"/audit/ [{DEEP_PAGES} pages deep]", False, "/audit/", DEEP_PAGES),
        fixed("/threads/", False, "/threads/"),
        fixed(f"/threads/ [{DEEP_PAGES} pages deep]", False, "/threads/", DEEP_PAGES),
        Spec(
            "/runs/<id>/ [20,000 events]",
            False,
            lambda t: f"/runs/{t.fixtures['huge_run']}/",
        ),
        Spec(
            "/runs/<id>/trace [20,000 events]",
            False,
            lambda t: f"/runs/{t.fixtures['huge_run']}/trace",
        ),
        Spec(
            "/threads/<id>/ [10,000 messages, 2,500 runs]",
            False,
            lambda t: f"/threads/{t.fixtures['big_thread']}/",
        ),
        fixed("/failures/ (failure groups)", False, "/failures/"),
        fixed("/failures/?state=all", False, "/failures/?state=all"),
        Spec("/runs/ [the largest failure group]", False, lambda _t: largest_failure_group()),
        fixed("/admin/runs/ticket/ (change list)", False, "/admin/runs/ticket/"),
        fixed("/admin/common/auditentry/ (change list)", False, "/admin/common/auditentry/"),
    ]


def api_list_specs() -> list[Spec]:
    """The other API lists and the big objects' endpoints."""
    return [
        fixed("/api/v1/tickets?status=pending", True, "/api/v1/tickets?status=pending"),
        fixed(
            f"/api/v1/tickets?status=pending [{TICKET_PAGES} pages deep]",
            True,
            "/api/v1/tickets?status=pending",
            TICKET_PAGES,
        ),
        fixed("/api/v1/audit", True, "/api/v1/audit"),
        fixed(f"/api/v1/audit [{DEEP_PAGES} pages deep]", True, "/api/v1/audit", DEEP_PAGES),
        fixed("/api/v1/threads", True, "/api/v1/threads"),
        fixed(f"/api/v1/threads [{DEEP_PAGES} pages deep]", True, "/api/v1/threads", DEEP_PAGES),
        Spec(
            "/api/v1/runs/<id> [20,000 events]",
            True,
            lambda t: f"/api/v1/runs/{t.fixtures['huge_run']}",
        ),
        Spec(
            "/api/v1/runs/<id>/events [20,000 events]",
            True,
            lambda t: f"/api/v1/runs/{t.fixtures['huge_run']}/events",
        ),
        Spec(
            "/api/v1/threads/<id> [2,500 runs]",
            True,
            lambda t: f"/api/v1/threads/{t.fixtures['big_thread']}",
        ),
        Spec(
            "/api/v1/threads/<id>/messages [10,000]",
            True,
            lambda t: f"/api/v1/threads/{t.fixtures['big_thread']}/messages",
        ),
    ]


def sort_specs() -> list[Spec]:
    """The runs list by duration, longest first (runs migration 0021's index): the first
    page, a deep one, and with the filters that narrow its scan."""

    def longest(kind: str) -> Callable[[Target], str | None]:
        return lambda t: with_query(
            "/runs/", {**filter_values(t, kind, api=False), "sort": "longest"}
        )

    return [
        fixed("/runs/ [sort longest]", False, "/runs/?sort=longest"),
        fixed(
            f"/runs/ [sort longest, {DEEP_PAGES} pages deep]",
            False,
            "/runs/?sort=longest",
            DEEP_PAGES,
        ),
        Spec("/runs/ [sort longest + agent]", False, longest("agent")),
        Spec("/runs/ [sort longest + reason]", False, longest("reason")),
        Spec("/runs/ [sort longest + range]", False, longest("range")),
    ]


def build_specs() -> list[Spec]:
    api_names = api_run_params()
    return [
        fixed("/ (dashboard)", False, "/"),
        fixed("/dashboard/stats (live partial)", False, "/dashboard/stats"),
        fixed("/runs/ [first page]", False, "/runs/"),
        fixed(f"/runs/ [{DEEP_PAGES} pages deep]", False, "/runs/", DEEP_PAGES),
        *sort_specs(),
        *runs_filter_specs(False, api_names),
        *ui_list_specs(),
        fixed("/api/v1/runs [first page]", True, "/api/v1/runs"),
        fixed(f"/api/v1/runs [{DEEP_PAGES} pages deep]", True, "/api/v1/runs", DEEP_PAGES),
        *runs_filter_specs(True, api_names),
        *api_list_specs(),
    ]
