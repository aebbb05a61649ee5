from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.core.cache import caches
from rest_framework.test import APIClient

from runs.api.auth import THROTTLE_CACHE
from runs.api.tokens import token_create
from runs.models import Run
from runs.services.audit import Actor
from runs.services.runs import run_start
from tests.factories import call, scripted_agent
from tests.runs.helpers import drive

APPROVAL = {"default_behavior": "allow", "rules": [{"tool": "write_note", "behavior": "ask"}]}
NOTE = call("write_note", {"title": "lunch", "body": "pizza"})


@pytest.fixture(autouse=True)
def _fresh_throttle():
    caches[THROTTLE_CACHE].clear()
    yield
    caches[THROTTLE_CACHE].clear()


def user_in(role: str, name: str | None = None) -> User:
    user = User.objects.create_user(name or role)
    user.groups.add(Group.objects.get(name=role))
    return user


def token_for(user: User, name: str = "test", **kwargs: Any) -> str:
    _, raw = token_create(user=user, name=name, actor=Actor(label="test", source="cli"), **kwargs)
    return raw


def bearer(raw: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


@pytest.fixture
def operator(db) -> User:
    return user_in("operator", "olga")


@pytest.fixture
def viewer(db) -> User:
    return user_in("viewer", "vic")


@pytest.fixture
def api(operator) -> APIClient:
    """An operator's token client."""
    return bearer(token_for(operator, "ops"))


@pytest.fixture
def viewer_api(viewer) -> APIClient:
    return bearer(token_for(viewer, "reader"))


@pytest.fixture
def anon() -> APIClient:
    return APIClient()


def waiting_run(title: str = "lunch") -> Run:
    agent = scripted_agent(
        [
            {"text": "noting", "tool_calls": [call("write_note", {"title": title, "body": "b"})]},
            {"text": "all done"},
        ],
        permission=APPROVAL,
    )
    run = drive(run_start(agent=agent, messages="write it down"))
    assert run.status == Run.Status.WAITING
    return run


def done_run(text: str = "hi there") -> Run:
    agent = scripted_agent([{"text": text}])
    run = drive(run_start(agent=agent, messages="hello"))
    assert run.status == Run.Status.DONE
    return run


def assert_error(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, (
        response.status_code,
        getattr(response, "content", b"")[:500],
    )
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message", "details"}, body
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert isinstance(body["error"]["details"], dict)
    return body["error"]
