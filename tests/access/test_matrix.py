"""The authorization matrix (docs/authorization-matrix.md): every route has an entry, and
team alpha's users never reach team beta's objects."""

from __future__ import annotations

import re
import sys
import types
from typing import Any

import pytest
from django.db import transaction
from django.http import HttpResponse
from django.test import override_settings
from django.urls import path, reverse

from agents.models import Agent
from common.access import forget
from common.models import Membership, Team
from runs.models import Decision, PendingInput, Run, Schedule, Thread, Ticket

from . import matrix as m
from .routes import all_routes
from .world import Side, World

ROUTES = all_routes()
KEYS = [route.key for route in ROUTES]
CHECKED = {m.SELF, m.LIST, m.DETAIL, m.ACTION, m.LOOKUP, m.OWN, m.ADMIN, m.ADMIN_ACTION}


def coverage_problems(keys: list[str]) -> list[str]:
    missing, stale = m.missing_and_stale(keys)
    problems = []
    if missing:
        problems.append("routes without an authorization-matrix entry: " + ", ".join(missing))
    if stale:
        problems.append("authorization-matrix entries without a route: " + ", ".join(stale))
    return problems


def test_every_route_has_an_entry() -> None:
    assert not coverage_problems(KEYS), "\n".join(coverage_problems(KEYS))


def _new_thing(request: Any, run_id: Any) -> HttpResponse:
    return HttpResponse("new")


def test_a_new_route_without_an_entry_is_reported() -> None:
    from awaken_site import urls as site_urls

    module = types.ModuleType("tests.access._urls_with_new_thing")
    module.urlpatterns = [  # type: ignore[attr-defined]
        path("runs/<uuid:run_id>/new-thing", _new_thing, name="new-thing"),
        *site_urls.urlpatterns,
    ]
    sys.modules[module.__name__] = module
    try:
        with override_settings(ROOT_URLCONF=module.__name__):
            keys = [route.key for route in all_routes()]
    finally:
        del sys.modules[module.__name__]
    assert set(keys) - set(KEYS) == {"new-thing"}
    assert set(m.missing_and_stale(keys)[0]) - set(m.missing_and_stale(KEYS)[0]) == {"new-thing"}
    message = coverage_problems(keys)[0]
    assert message.startswith("routes without an authorization-matrix entry: ")
    assert "new-thing" in message.split(": ", 1)[1].split(", ")


# --- the HTTP checks ------------------------------------------------------------------------


def _url(key: str, entry: m.Entry, side: Side) -> str:
    return url_for(key, entry.args(side) if entry.args else {})


def url_for(key: str, args: dict[str, Any]) -> str:
    kwargs = {name: str(value) for name, value in args.items()}
    if key.startswith("re:"):  # an unnamed route: its pattern, filled in
        return "/" + re.sub(r"<(?:\w+:)?(\w+)>", lambda match: kwargs[match[1]], key[3:])
    return reverse(key, kwargs=kwargs)


def _clients(entry: m.Entry, world: World, client: Any) -> list[tuple[str, Any]]:
    from rest_framework.test import APIClient

    from tests.factories import bearer

    if entry.who == "admin":
        user, token = world.alpha_admin, world.alpha_admin_token
    else:
        user, token = world["alpha"].operator, world["alpha"].token
    session = APIClient() if entry.token else client
    session.force_login(user)
    clients = [(f"{entry.who} session", session)]
    if entry.token:
        clients.append((f"{entry.who} token", bearer(token)))
    return clients


def _send(
    client: Any,
    method: str,
    url: str,
    entry: m.Entry,
    side: Side,
    api: bool,
    body_of: m.Args | None = None,
) -> Any:
    body_of = body_of or entry.body
    body = body_of(side) if body_of else {}
    query = entry.query(side) if entry.query else None
    if method == "GET":
        return client.get(url, query)
    if api:
        return client.generic(method, url, _json(body), content_type="application/json")
    return client.generic(
        method, url, _form(body), content_type="application/x-www-form-urlencoded"
    )


def _json(body: dict[str, Any]) -> str:
    import json

    return json.dumps(body, default=str)


def _form(body: dict[str, Any]) -> str:
    from urllib.parse import urlencode

    return urlencode(body, doseq=True)


def _text(response: Any) -> str:
    if not getattr(response, "streaming", False):
        return response.content.decode(errors="replace")
    if response.get("Content-Type", "").startswith("text/event-stream"):
        return ""  # a live stream is not read here (it would wait)
    return b"".join(response.streaming_content).decode(errors="replace")  # an export


def _snapshot(side: Side) -> tuple[Any, ...]:
    run = Run.objects.get(pk=side.run.pk)
    return (
        Run.objects.filter(agent=side.agent).count(),
        run.status,
        run.priority,
        Ticket.objects.get(pk=side.ticket.pk).status,
        Ticket.objects.get(pk=side.ticket.pk).claimed_by_id
        if hasattr(Ticket, "claimed_by_id")
        else None,
        Decision.objects.filter(ticket__run__agent=side.agent).count(),
        PendingInput.objects.filter(thread=side.thread).values_list("status", flat=True).first(),
        PendingInput.objects.filter(thread=side.thread).count(),
        Team.objects.filter(pk=side.team.pk).values_list(
            "frozen", "reason_required", "bulk_confirm_above", "name"
        )[0],
        sorted(Membership.objects.filter(team=side.team).values_list("user_id", "role")),
        sorted(
            Schedule.objects.filter(agent__team=side.team).values_list(
                "name", "enabled", "priority", "next_run_at", "last_outcome"
            )
        ),
    )


def _leaks(text: str, beta: Side, entry: m.Entry) -> list[str]:
    return [marker for marker in beta.markers() + entry.extra(beta) if marker in text]


# How a lookup naming beta's object may be refused: the API with 400 or 404; a page also
# with its form's error (200, or a redirect to where a flash message says why). Either way
# nothing of beta's shows and nothing changes (both checked).
_LOOKUP_REFUSALS = {True: (400, 404), False: (200, 302, 400, 404)}


def _allowed(status: int) -> bool:
    return status not in (403, 404) and status < 500


CASES = [
    pytest.param(key, entry, id=label)
    for key in KEYS
    for label, entry in m.checked_entries(key)
    if entry.kind in CHECKED
    and not (entry.kind == m.ADMIN_ACTION and entry.args is None)  # no row per team
]


@pytest.mark.parametrize(("key", "entry"), CASES)
def test_alpha_never_reaches_beta(key: str, entry: m.Entry, world: World, client: Any) -> None:
    failures: list[str] = []
    if entry.kind in (m.ADMIN, m.ADMIN_ACTION):
        client.force_login(world.alpha_admin)
        failures += _check_admin(key, entry, client, world)
    else:
        for label, client_ in _clients(entry, world, client):
            with transaction.atomic():  # each client starts from the same world
                failures += _check(key, entry, label, client_, world["alpha"], world["beta"])
                transaction.set_rollback(True)
    assert not failures, "\n".join(failures)


def _check_list(
    key: str, entry: m.Entry, label: str, client: Any, alpha: Side, beta: Side
) -> list[str]:
    failures: list[str] = []
    url = _url(key, entry, alpha)
    response = client.get(url)
    text = _text(response)
    if response.status_code != 200:
        failures.append(f"{label} GET {url}: {response.status_code}, not 200")
    if leaked := _leaks(text, beta, entry):
        failures.append(f"{label} GET {url} shows beta's {leaked}")
    if entry.shows and response.status_code == 200 and entry.shows(alpha) not in text:
        failures.append(f"{label} GET {url} does not show alpha's {entry.shows(alpha)}")
    if entry.figures:
        failures += _check_figures(label, client, url, alpha, beta)
    return failures


CSRF = re.compile(r"[A-Za-z0-9]{64}")


def _figures(client: Any, url: str) -> str:
    return CSRF.sub("csrf", _text(client.get(url)))


def _check_figures(label: str, client: Any, url: str, alpha: Side, beta: Side) -> list[str]:
    """Counts name no object: beta's runs are not counted if the figures change when
    beta's agent and thread join alpha's team."""
    before = _figures(client, url)
    if _figures(client, url) != before:
        return [f"{label} GET {url}: two renders differ; the figures check cannot compare"]
    with transaction.atomic():
        Agent.objects.filter(team=beta.team).update(team=alpha.team)
        Thread.objects.filter(team=beta.team).update(team=alpha.team)
        for user in (alpha.operator, beta.operator):
            forget(user)
        after = _figures(client, url)
        transaction.set_rollback(True)
    if after == before:
        return [f"{label} GET {url}: the figures count beta's runs (unchanged when beta joins)"]
    return []


def _check(key: str, entry: m.Entry, label: str, client: Any, alpha: Side, beta: Side) -> list[str]:
    if entry.kind == m.LIST:
        return _check_list(key, entry, label, client, alpha, beta)
    failures: list[str] = []
    before = _snapshot(beta)
    beta_statuses: dict[str, int] = {}
    methods = entry.methods if entry.kind != m.SELF else ()
    for method, body_of in [(verb, b) for verb in methods for b in m.bodies(entry, verb)]:
        url = _url(key, entry, beta)
        response = _send(client, method, url, entry, beta, entry.token, body_of)
        status = beta_statuses[method] = response.status_code
        refusals = entry.refusals or _LOOKUP_REFUSALS[entry.token]
        if entry.kind == m.LOOKUP and status not in refusals:
            failures.append(f"{label} {method} {url} naming beta's object: {status}")
        elif entry.kind != m.LOOKUP and status not in (404, 405):
            failures.append(f"{label} {method} {url} (beta's): {status}, not 404")
        # an error may echo what the client sent (an id in the URL, query or body); nothing
        # more of beta's
        sent = url + repr(entry.query(beta) if entry.query else "")
        sent += repr(body_of(beta) if body_of else "")
        if leaked := [x for x in _leaks(_text(response), beta, entry) if x not in sent]:
            failures.append(f"{label} {method} {url} shows beta's {leaked}")
    if entry.kind not in (m.LOOKUP, m.SELF) and 404 not in beta_statuses.values():
        failures.append(f"{label} {key}: no method answered 404 for beta's object: {beta_statuses}")
    if (after := _snapshot(beta)) != before:
        failures.append(f"{label} {key}: beta's objects changed: {before} -> {after}")
    if not entry.alpha_check:
        return failures
    for method in entry.methods:
        url = _url(key, entry, alpha)
        status = _send(client, method, url, entry, alpha, entry.token).status_code
        if beta_statuses.get(method) == 405:
            if status != 405:
                failures.append(f"{label} {method} {url}: 405 for beta's, {status} for alpha's")
        elif not _allowed(status):
            failures.append(f"{label} {method} {url} (alpha's own): {status}")
    return failures


def _check_admin(key: str, entry: m.Entry, client: Any, world: World) -> list[str]:
    """Team alpha's admin in the Django admin: nothing of beta's shows, beta's row is not
    shown, and alpha's own pages answer as they do for a site-wide admin."""
    from django.test import Client

    alpha, beta = world["alpha"], world["beta"]
    site = Client()
    site.force_login(world.site_admin)
    failures: list[str] = []
    # the admin's "… with ID X doesn't exist" message echoes the id asked for (on the next
    # page shown, too): that names nothing the client did not send
    sent = _url(key, entry, beta) if entry.kind == m.ADMIN_ACTION else ""
    for method in entry.methods:
        if entry.kind == m.ADMIN_ACTION:
            url = _url(key, entry, beta)
            if key.startswith("re:"):  # the admin's old link: where its redirect ends
                response = client.get(url, follow=True)
                ended = response.request["PATH_INFO"]
                shown = ended.startswith(url) and response.status_code == 200
            else:
                response = _send(client, method, url, entry, beta, False)
                shown = response.status_code == 200
            leaked = [x for x in _leaks(_text(response), beta, entry) if x not in sent]
            if shown or leaked:
                failures.append(f"admin {method} {url} (beta's row): {response.status_code}")
        url = _url(key, entry, alpha)
        response = _send(client, method, url, entry, alpha, False)
        if leaked := [x for x in _leaks(_text(response), beta, entry) if x not in sent]:
            failures.append(f"admin {method} {url} shows beta's {leaked}")
        if entry.alpha_check:
            expected = _send(site, method, url, entry, alpha, False).status_code
            refused = entry.may_refuse and response.status_code == 403
            if response.status_code != expected and not refused:
                failures.append(
                    f"admin {method} {url}: {response.status_code} for alpha's admin, "
                    f"{expected} for a site-wide admin"
                )
    return failures
