"""The runs list's duration, tokens and cost columns, its sort by duration (longest
first, finished runs, paged by the run's duration), and the time display each operator
chooses in the header (relative, local, UTC), remembered per user."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal

import pytest
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from runs.models import OperatorPreference, Run
from runs.selectors.run_sort import LONGEST, longest_page
from runs.selectors.runs import RunFilters, run_list
from runs.views import lists
from tests.factories import done_run, user_with_role

pytestmark = pytest.mark.django_db


def rows(text: str) -> list[str]:
    return re.findall(r'id="run-row-([0-9a-f-]+)"', text)


def links(text: str) -> dict[str, str]:
    found = re.findall(r'<a href="([^"]+)" rel="(\w+)"', text)
    return {rel: href.replace("&amp;", "&") for href, rel in found}


def timed_runs(seconds: list[int]) -> list[Run]:
    """Finished runs that ran these many seconds, created a second apart."""
    start = timezone.now() - dt.timedelta(days=1)
    made = []
    for i, length in enumerate(seconds):
        run = done_run(f"run {i}")
        began = start + dt.timedelta(minutes=i)
        Run.objects.filter(pk=run.pk).update(
            created_at=began,
            started_at=began,
            finished_at=began + dt.timedelta(seconds=length),
        )
        made.append(run)
    return made


def test_a_row_shows_duration_tokens_and_cost_from_its_own_columns(operator_client):
    (run,) = timed_runs([75])
    Run.objects.filter(pk=run.pk).update(
        input_tokens=12000,
        output_tokens=345,
        input_price_per_million_usd=Decimal("2.50"),
        output_price_per_million_usd=Decimal("10"),
    )
    page = operator_client.get(reverse("runs:run-list")).content.decode()
    row = page[page.index(f'id="run-row-{run.pk}"') :]
    row = row[: row.index("</tr>")]
    assert ">1 min 15 s</td>" in row
    assert 'title="12,000 in / 345 out">12,345</td>' in row
    assert ">$0.0335</td>" in row  # 12000 * 2.5 / 1e6 + 345 * 10 / 1e6
    for header in ("duration", "tokens", "cost"):
        assert f">{header}</" in page


def test_an_unpriced_run_shows_no_cost_and_a_queued_one_no_duration(operator_client):
    (run,) = timed_runs([5])
    Run.objects.filter(pk=run.pk).update(
        started_at=None,
        finished_at=None,
        input_price_per_million_usd=None,
        output_price_per_million_usd=None,
    )
    page = operator_client.get(reverse("runs:run-list")).content.decode()
    assert 'title="it has not started">–</td>' in page
    assert 'class="num run-cost" title="at its model\'s prices when the run was created">—<' in page


def test_the_new_columns_add_no_query_per_row(operator_client):
    timed_runs([1, 2])
    with CaptureQueriesContext(connection) as two:
        operator_client.get(reverse("runs:run-list"))
    timed_runs([3, 4, 5, 6])
    with CaptureQueriesContext(connection) as six:
        operator_client.get(reverse("runs:run-list"))
    assert len(six.captured_queries) == len(two.captured_queries)


@pytest.mark.parametrize("in_range", [False, True], ids=["all", "range read first"])
def test_longest_first_pages_by_duration_and_back(in_range):
    lengths = [30, 5, 90, 5, 60, 1, 45]
    runs = timed_runs(lengths)
    # a run still going and one never started have no duration: left out
    Run.objects.filter(pk=done_run("going").pk).update(finished_at=None)
    Run.objects.filter(pk=done_run("never").pk).update(started_at=None)
    every = Run.objects.all()
    expected = sorted(runs, key=lambda r: (-lengths[runs.index(r)], -r.pk.int))
    created = sorted(Run.objects.values_list("created_at", flat=True))
    # (on PostgreSQL, a range read hour by hour: it spans two)
    span = {"since": created[0] - dt.timedelta(minutes=90), "until": None} if in_range else {}

    def page(cursor):
        return longest_page(every, cursor, 3, **span)

    first = page(None)
    second = page(first.next_cursor)
    third = page(second.next_cursor)
    got = [r.pk for page in (first, second, third) for r in page.items]
    assert got == [r.pk for r in expected]
    assert third.next_cursor is None
    assert [r.ran_for for r in first.items] == [dt.timedelta(seconds=s) for s in (90, 60, 45)]
    back = page(third.prev_cursor)
    assert [r.pk for r in back.items] == [r.pk for r in second.items]
    top = page(back.prev_cursor)
    assert top.first and [r.pk for r in top.items] == [r.pk for r in first.items]


def test_longest_first_within_a_creation_range_keeps_to_the_range():
    lengths = [30, 5, 90, 5, 60, 1, 45]  # created a minute apart
    runs = timed_runs(lengths)
    first = Run.objects.get(pk=runs[1].pk).created_at
    last = Run.objects.get(pk=runs[5].pk).created_at
    filters = RunFilters(since=first, until=last, sort=LONGEST)  # runs 1..4
    page = run_list(filters=filters, size=3)
    assert [r.pk for r in page.items] == [runs[2].pk, runs[4].pk, max(runs[1].pk, runs[3].pk)]
    rest = run_list(filters=filters, cursor=page.next_cursor, size=3)
    assert [r.pk for r in rest.items] == [min(runs[1].pk, runs[3].pk)]
    assert rest.next_cursor is None


def test_a_range_read_hour_by_hour_pages_as_the_whole_list_does():
    """Runs over five hours, the longest of the range in different hours and some
    outside it at both ends (on PostgreSQL the range is read hour by hour:
    run_hour_longest_idx; elsewhere whole): the pages are those of the sorted range."""
    start = timezone.now().replace(minute=40, second=0, microsecond=0) - dt.timedelta(hours=8)
    made = []
    for i, length in enumerate([7, 50, 3, 41, 90, 8, 66, 12, 2, 75, 30, 5, 58, 1]):
        run = done_run(f"run {i}")
        began = start + dt.timedelta(minutes=23 * i)  # 14 runs over five hours
        Run.objects.filter(pk=run.pk).update(
            created_at=began, started_at=began, finished_at=began + dt.timedelta(seconds=length)
        )
        made.append(Run.objects.annotate(ran_for=F("finished_at") - F("started_at")).get(pk=run.pk))
    since, until = made[1].created_at, made[12].created_at  # runs 1..11: partial hours at both ends
    inside = sorted(made[1:12], key=lambda r: (-r.ran_for, -r.pk.int))
    filters = RunFilters(since=since, until=until, sort=LONGEST)
    pages, cursor = [], None
    while True:
        page = run_list(filters=filters, cursor=cursor, size=3)
        pages.append([r.pk for r in page.items])
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert [pk for page in pages for pk in page] == [r.pk for r in inside]
    back = run_list(filters=filters, cursor=page.prev_cursor, size=3)
    assert [r.pk for r in back.items] == pages[-2]


def test_the_duration_header_sorts_the_list_and_keeps_the_filters(operator_client, monkeypatch):
    monkeypatch.setattr(lists, "RUNS_PAGE", 2)
    runs = timed_runs([10, 300, 20])
    page = operator_client.get(reverse("runs:run-list"), {"status": "done"}).content.decode()
    assert '<a href="/runs/?status=done&amp;sort=longest"' in page
    page = operator_client.get("/runs/?status=done&sort=longest").content.decode()
    assert rows(page) == [str(runs[1].pk), str(runs[2].pk)]
    assert 'aria-sort="descending"><a href="/runs/?status=done&amp;sort=newest"' in page
    assert "Shorter runs" in page and 'data-prepend="false"' in page
    rest = operator_client.get(links(page)["next"]).content.decode()
    assert rows(rest) == [str(runs[0].pk)]


# --- the time display ------------------------------------------------------------------------


def created_cell(page: str) -> str:
    cells = re.findall(r'<td class="small muted">(<time [^>]*>[^<]*</time>)</td>', page)
    assert cells, page[:2000]
    return cells[0]


def test_times_are_relative_by_default_and_the_switch_is_remembered(client):
    run = done_run("hi")
    moment = timezone.now() - dt.timedelta(hours=3)
    Run.objects.filter(pk=run.pk).update(created_at=moment)
    user = user_with_role("operator", "alice")
    client.force_login(user)
    page = client.get("/runs/").content.decode()
    assert 'data-time-display="relative"' in page
    assert re.search(r'data-shown="relative" [^>]*>3\xa0hours ago</time>', created_cell(page))
    response = client.post("/preferences/time", {"time_display": "utc", "next": "/runs/?q=x"})
    assert response.status_code == 302 and response["Location"] == "/runs/?q=x"
    assert OperatorPreference.objects.get(user=user).time_display == "utc"
    page = client.get("/runs/").content.decode()
    assert 'data-time-display="utc"' in page
    assert 'value="utc" class="link" aria-pressed="true"' in page
    utc = moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    assert re.search(f'data-shown="utc" [^>]*>{utc}</time>', created_cell(page))
    client.post("/preferences/time", {"time_display": "local", "next": "/runs/"})
    page = client.get("/runs/").content.decode()
    cell = created_cell(page)  # the site's zone, named; the page's script shows the browser's
    assert 'data-time="ago" data-shown="local" ' in cell and re.search(r"\d\d:\d\d:\d\d \w+<", cell)


def test_the_switch_refuses_another_sites_page_and_an_unknown_choice(client):
    user = user_with_role("operator", "alice")
    client.force_login(user)
    response = client.post(
        "/preferences/time", {"time_display": "utc", "next": "https://evil.example/"}
    )
    assert response["Location"] == "/"
    client.post("/preferences/time", {"time_display": "<b>x</b>", "next": "/"})
    assert OperatorPreference.objects.get(user=user).time_display == "utc"
    assert client.get("/preferences/time").status_code == 405


def test_each_user_has_their_own_display(client):
    done_run("hi")
    alice, bob = user_with_role("operator", "alice"), user_with_role("operator", "bob")
    OperatorPreference.objects.create(user=alice, time_display="utc")
    client.force_login(bob)
    assert 'data-time-display="relative"' in client.get("/runs/").content.decode()


def test_durations_read_the_same_in_every_display(client):
    from runs.templatetags.runs_extras import time_html

    moment = timezone.now() - dt.timedelta(minutes=3, seconds=5)
    for display in ("relative", "local", "utc"):
        assert ">3 min</time>" in time_html(moment, "short", display=display)
    clock = time_html(moment, "clock", display="utc")
    assert moment.astimezone(dt.UTC).strftime(">%H:%M:%S.") in clock
