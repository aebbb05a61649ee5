"""No existence oracles (docs/authorization-matrix.md): for every role of team alpha
(viewer, operator, admin) and every transport (pages, htmx actions, the API with a session
and with a token, the Django admin), a route pointed at team beta's object answers exactly
as it does for an id that names nothing: the same status, the same redirect and the same
body, but for the id itself. The entries are the authorization matrix's
(tests/access/matrix.py); the sockets, the event stream and A2A are checked at the end."""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from typing import Any
from unittest import mock
from urllib.parse import urlencode

import pytest
from django.db import transaction
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from tests.factories import bearer

from . import matrix as m
from .test_matrix import KEYS, _text, url_for
from .world import World

ROLES = ("viewer", "operator", "admin")
PROBED = {m.DETAIL, m.ACTION, m.LOOKUP, m.OWN, m.ADMIN_ACTION}
UNKNOWN_INT = 2_000_000_000


# --- an unknown id in place of each of beta's ----------------------------------------------


def _unknown_text(text: str, index: int) -> str:
    """An id of the same kind as `text` that names nothing."""
    try:
        uuid.UUID(text)
    except ValueError:
        pass
    else:
        return f"0190a0a0-0000-7000-8000-{index + 1:012x}"
    if text.isdigit():
        return str(UNKNOWN_INT + index)
    if "beta" in text:
        return text.replace("beta", "zeta")  # as long, and as valid a slug or name
    return f"unknown-{index}"


def unknown_like(alpha: Any, beta: Any, names: dict[str, str]) -> Any:
    """`beta` (URL arguments, a query or a body naming beta's objects) with every leaf that
    differs from alpha's counterpart (an id of one team's object) replaced by an unknown
    one; `names` collects beta's value -> the unknown one."""
    if isinstance(beta, dict):
        other = alpha if isinstance(alpha, dict) else {}
        return {key: unknown_like(other.get(key), value, names) for key, value in beta.items()}
    if isinstance(beta, (list, tuple)):
        others = list(alpha) if isinstance(alpha, (list, tuple)) else []
        others += [None] * (len(beta) - len(others))
        return type(beta)(unknown_like(a, b, names) for a, b in zip(others, beta, strict=False))
    if beta == alpha or beta is None or isinstance(beta, bool):
        return beta
    text = str(beta)
    if text not in names:
        names[text] = _unknown_text(text, len(names))
    if isinstance(beta, int):
        return int(names[text])
    return names[text]


def test_unknown_ids_keep_constants_and_replace_ids() -> None:
    names: dict[str, str] = {}
    alpha = {"slug": "alpha", "username": "operator-alpha", "role": "viewer", "ids": ["1"]}
    beta = {"slug": "beta", "username": "operator-beta", "role": "viewer", "ids": ["2"]}
    assert unknown_like(alpha, beta, names) == {
        "slug": "zeta",
        "username": "operator-zeta",
        "role": "viewer",
        "ids": [str(UNKNOWN_INT + 2)],
    }
    assert names == {"beta": "zeta", "operator-beta": "operator-zeta", "2": str(UNKNOWN_INT + 2)}


# --- requests and their answers --------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    method: str
    url: str
    query: dict[str, Any] | None
    body: dict[str, Any]
    json: bool  # an API request: a JSON body


@dataclass(frozen=True)
class Answer:
    status: int
    location: str
    text: str

    def shown(self) -> str:
        return f"{self.status} {self.location} {self.text[:300]!r}"


def _requests(key: str, entry: m.Entry, world: World) -> list[tuple[Request, Request, dict]]:
    """(beta's request, the unknown one, beta's value -> the unknown one), for each method
    and body of the entry."""
    alpha, beta = world["alpha"], world["beta"]
    pairs = []
    for method in entry.methods:
        for body_of in m.bodies(entry, method):
            names: dict[str, str] = {}
            parts = [
                (f(alpha), f(beta)) if f else ({}, {}) for f in (entry.args, entry.query, body_of)
            ]
            unknown = [unknown_like(a, b, names) for a, b in parts]
            api = entry.token
            beta_request = Request(
                method,
                url_for(key, parts[0][1]),
                parts[1][1] if entry.query else None,
                parts[2][1],
                api,
            )
            unknown_request = Request(
                method,
                url_for(key, unknown[0]),
                unknown[1] if entry.query else None,
                unknown[2],
                api,
            )
            pairs.append((beta_request, unknown_request, names))
    return pairs


def _send(client: Any, request: Request, headers: dict[str, str]) -> Any:
    if request.method == "GET":
        return client.get(request.url, request.query, headers=headers)
    url = request.url + ("?" + urlencode(request.query, doseq=True) if request.query else "")
    if request.json:
        data = json.dumps(request.body, default=str)
        return client.generic(
            request.method, url, data, content_type="application/json", headers=headers
        )
    data = urlencode(request.body, doseq=True)
    return client.generic(
        request.method,
        url,
        data,
        content_type="application/x-www-form-urlencoded",
        headers=headers,
    )


CSRF = re.compile(r"[A-Za-z0-9]{64}")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def answer(client: Any, request: Request, headers: dict[str, str], follow: bool) -> Answer:
    """The answer to `request`, in a transaction rolled back afterwards (each request meets
    the same world); with `follow`, a redirect's next page (where a flash message shows) is
    part of the answer."""
    with transaction.atomic():
        response = _send(client, request, headers)
        text, location = _text(response), response.get("Location", "")
        if follow and 300 <= response.status_code < 400 and location:
            after = client.get(location, headers=headers)
            text += f"\n--- {after.status_code} after the redirect\n" + _text(after)
        transaction.set_rollback(True)
    return Answer(response.status_code, location, CSRF.sub("csrf", text))


def _as_beta(found: Answer, names: dict[str, str]) -> Answer:
    """The unknown id's answer with the unknown ids written as beta's ("modulo the id")."""
    text, location = found.text, found.location
    pairs = dict(names)
    for beta_value, unknown in names.items():  # pages show a run by its id's last 8 chars
        if UUID.fullmatch(beta_value) and UUID.fullmatch(unknown):
            pairs.setdefault(beta_value[-8:], unknown[-8:])
    for beta_value, unknown in sorted(pairs.items(), key=lambda item: -len(item[1])):
        text, location = text.replace(unknown, beta_value), location.replace(unknown, beta_value)
    return Answer(found.status, location, text)


def differences(beta: Answer, unknown: Answer, names: dict[str, str]) -> str:
    unknown = _as_beta(unknown, names)
    if beta == unknown:
        return ""
    if beta.status != unknown.status or beta.location != unknown.location:
        return f"beta's: {beta.shown()}; unknown: {unknown.shown()}"
    start = next(
        (i for i, (a, b) in enumerate(zip(beta.text, unknown.text, strict=False)) if a != b),
        min(len(beta.text), len(unknown.text)),
    )
    window = slice(max(start - 80, 0), start + 160)
    return (
        f"{beta.status}, bodies differ at {start}: beta's {beta.text[window]!r}; "
        f"unknown: {unknown.text[window]!r}"
    )


# --- the transports, for each role -------------------------------------------------------------


def transports(entry: m.Entry, world: World, role: str) -> list[tuple[str, Any, dict[str, str]]]:
    """(label, client, headers) of the ways the role reaches the entry's route."""
    if entry.kind == m.ADMIN_ACTION:
        admin = Client()
        admin.force_login(world.staff[role])
        return [(f"{role} (staff) admin", admin, {})]
    if entry.token:
        session = APIClient()
        session.force_login(world.roles[role])
        return [
            (f"{role} API session", session, {}),
            (f"{role} API token", bearer(world.role_tokens[role]), {}),
        ]
    page = Client()
    page.force_login(world.roles[role])
    return [(f"{role} page", page, {}), (f"{role} htmx", page, {"HX-Request": "true"})]


CASES = [
    pytest.param(key, entry, id=label)
    for key in KEYS
    for label, entry in m.checked_entries(key)
    if entry.kind in PROBED
    and not (entry.kind == m.ADMIN_ACTION and entry.args is None)  # no row per team
]


@pytest.mark.parametrize(("key", "entry"), CASES)
def test_another_teams_object_answers_as_an_unknown_id(
    key: str, entry: m.Entry, world: World
) -> None:
    pairs = _requests(key, entry, world)
    # one clock for both answers: "4 s ago" and a running run's "so far" are the clock's
    with mock.patch.object(timezone, "now", return_value=timezone.now()):
        failures = _compare_answers(entry, world, pairs)
    assert not failures, "\n".join(failures)


def _compare_answers(entry: m.Entry, world: World, pairs: Any) -> list[str]:
    failures = []
    for role in ROLES:
        for label, client, headers in transports(entry, world, role):
            follow = not entry.token
            for beta_request, unknown_request, names in pairs:
                beta = answer(client, beta_request, headers, follow)
                unknown = answer(client, unknown_request, headers, follow)
                if problem := differences(beta, unknown, names):
                    failures.append(f"{label} {beta_request.method} {beta_request.url}: {problem}")
    return failures
