"""The runs list pages both ways: "Older runs", "Newer runs" and "First page", by row
position, so runs started while someone pages never shift, repeat or skip a row; the API
hands out the same cursors (`prev_cursor`)."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from runs import selectors
from runs.models import Run
from runs.selectors.base import keyset_page
from runs.views import lists
from tests.factories import done_run

pytestmark = pytest.mark.django_db


def make_runs(n: int) -> list[Run]:
    """n runs a second apart; returned newest first (the list's order)."""
    start = timezone.now() - dt.timedelta(days=1)
    made = [done_run(f"run {i}") for i in range(n)]
    for i, run in enumerate(made):
        Run.objects.filter(pk=run.pk).update(created_at=start + dt.timedelta(seconds=i))
    return list(reversed(made))


def ids(page: selectors.Page) -> list[Any]:
    return [run.pk for run in page.items]


def test_newer_pages_back_to_the_first_exactly():
    runs = make_runs(12)
    every = Run.objects.all()
    first = keyset_page(every, None, 5)
    assert first.first and first.prev_cursor is None
    second = keyset_page(every, first.next_cursor, 5)
    third = keyset_page(every, second.next_cursor, 5)
    assert ids(first) + ids(second) + ids(third) == [run.pk for run in runs]
    assert third.next_cursor is None and not third.first
    back = keyset_page(every, third.prev_cursor, 5)
    assert ids(back) == ids(second) and not back.first
    top = keyset_page(every, back.prev_cursor, 5)
    assert ids(top) == ids(first)
    assert top.first and top.prev_cursor is None  # the head: its links are the first page's


def test_pages_hold_still_while_new_runs_arrive():
    runs = make_runs(12)
    every = Run.objects.all()
    first = keyset_page(every, None, 5)
    second = keyset_page(every, first.next_cursor, 5)
    newer = [done_run(f"new {i}") for i in range(3)]  # started while paging: newest of all
    third = keyset_page(every, second.next_cursor, 5)
    assert ids(third) == [run.pk for run in runs[10:]]  # nothing repeated, nothing skipped
    back = keyset_page(every, third.prev_cursor, 5)
    assert ids(back) == ids(second)
    before = keyset_page(every, back.prev_cursor, 5)
    assert ids(before) == ids(first) and not before.first  # the new runs are newer still
    top = keyset_page(every, before.prev_cursor, 5)
    # the previous page reaches the head: the first page as it is now, new runs first
    assert ids(top) == [run.pk for run in reversed(newer)] + [run.pk for run in runs[:2]]
    assert top.first
    assert keyset_page(every, top.next_cursor, 5).items[0].pk == runs[2].pk


def test_an_oldest_first_list_pages_back_too():
    runs = list(reversed(make_runs(7)))  # oldest first
    every = Run.objects.all()
    first = keyset_page(every, None, 3, oldest_first=True)
    second = keyset_page(every, first.next_cursor, 3, oldest_first=True)
    assert ids(first) + ids(second) == [run.pk for run in runs[:6]]
    assert ids(keyset_page(every, second.prev_cursor, 3, oldest_first=True)) == ids(first)


def links(text: str) -> dict[str, str]:
    found = re.findall(r'<a href="([^"]+)" rel="(first|prev|next)"', text)
    return {rel: href.replace("&amp;", "&") for href, rel in found}


def rows(text: str) -> list[str]:
    return re.findall(r'id="run-row-([0-9a-f-]+)"', text)


def test_the_runs_page_links_older_newer_and_first(operator_client, monkeypatch):
    monkeypatch.setattr(lists, "RUNS_PAGE", 4)
    runs = [str(run.pk) for run in make_runs(10)]
    first = operator_client.get(reverse("runs:run-list"), {"status": "done"}).content.decode()
    assert rows(first) == runs[:4]
    assert set(links(first)) == {"next"}  # the first page: no "Newer", no "First page"
    second = operator_client.get(links(first)["next"]).content.decode()
    assert rows(second) == runs[4:8]
    assert set(links(second)) == {"first", "prev", "next"}
    assert links(second)["first"] == "/runs/?status=done"
    assert "Newer runs" in second and "First page" in second
    third = operator_client.get(links(second)["next"]).content.decode()
    assert rows(third) == runs[8:]
    assert set(links(third)) == {"first", "prev"}
    back = operator_client.get(links(third)["prev"]).content.decode()
    assert rows(back) == runs[4:8]
    top = operator_client.get(links(back)["prev"]).content.decode()
    assert rows(top) == runs[:4] and set(links(top)) == {"next"}
    assert 'data-prepend="false"' in top  # filtered: live rows are not prepended


def test_the_api_gives_prev_cursor_for_newer_runs(operator_api):
    runs = [str(run.pk) for run in make_runs(5)]
    first = operator_api.get("/api/v1/runs", {"limit": 2}).json()
    assert first["prev_cursor"] is None
    second = operator_api.get("/api/v1/runs", {"limit": 2, "cursor": first["next_cursor"]}).json()
    assert [item["run_id"] for item in second["items"]] == runs[2:4]
    back = operator_api.get("/api/v1/runs", {"limit": 2, "cursor": second["prev_cursor"]}).json()
    assert [item["run_id"] for item in back["items"]] == runs[:2]
    assert back["prev_cursor"] is None
