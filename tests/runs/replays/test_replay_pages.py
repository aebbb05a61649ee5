"""The replay pages' roles and their table's refresh: admins start and cancel sets,
viewers and operators read them; a finished set's table says it will not change."""

from __future__ import annotations

import pytest
from django.urls import reverse

from runs.replays.models.replays import ReplaySet
from runs.services.submission_flow import run_start
from tests.factories import scripted_agent, user_with_role
from tests.runs.helpers import drive
from tests.runs.replays.test_replays import create, play

pytestmark = pytest.mark.django_db


@pytest.fixture
def replay_set() -> ReplaySet:
    agent = scripted_agent([{"text": "ok"}], slug="paged")
    for index in range(3):
        drive(run_start(agent=agent, messages=f"m{index}"))
    return create(agent, concurrency=1)


def test_roles_on_the_replay_pages(client, replay_set):
    detail = reverse("runs:replay-detail", args=[replay_set.pk])
    table = reverse("runs:replay-table", args=[replay_set.pk])
    cancel = reverse("runs:replay-cancel", args=[replay_set.pk])
    for role in ("viewer", "operator"):
        client.force_login(user_with_role(role, f"{role}-replays"))
        assert client.get(reverse("runs:replays")).status_code == 200
        page = client.get(detail).content.decode()
        assert "replay-items" in page and "Cancel replay" not in page
        assert client.post(cancel).status_code == 403
    client.force_login(user_with_role("admin", "admin-replays"))
    running = client.get(table).content.decode()
    assert "Cancel replay" in running and "data-refresh-final" not in running
    assert f'data-refresh-url="{table}"' in client.get(detail).content.decode()


def test_a_finished_sets_table_stops_refreshing_and_offers_no_cancel(client, replay_set):
    assert play(replay_set).status == ReplaySet.Status.DONE
    client.force_login(user_with_role("admin", "admin-replays"))
    table = client.get(reverse("runs:replay-table", args=[replay_set.pk])).content.decode()
    assert "data-refresh-final" in table and "Cancel replay" not in table
    detail = client.get(reverse("runs:replay-detail", args=[replay_set.pk])).content.decode()
    assert "data-refresh-url" not in detail
