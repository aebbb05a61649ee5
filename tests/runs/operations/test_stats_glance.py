"""Cost, tokens and latency at a glance: the usage counters against hand-computed figures
of a fixed data set, kept by the checkpoint like a recount from the rows, served by the
API and drawn on the dashboard, in a number of queries that does not grow with the runs."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from runs.models import HourlyUsage, Run, ToolCall
from runs.operations.selectors.usage import nice_top, usage
from runs.services import stats
from runs.services.submission_flow import run_start
from tests.factories import ModelFactory, call, scripted_agent
from tests.runs.helpers import drive

pytestmark = pytest.mark.django_db

# Two UTC days, ending at midnight two days ago: whole days for cost per day.
DAY = (timezone.now() - dt.timedelta(days=3)).astimezone(dt.UTC).date()
START = dt.datetime.combine(DAY, dt.time(), tzinfo=dt.UTC)
END = START + dt.timedelta(days=2)


def mid(index: int) -> float:
    """What a percentile in bucket `index` reports, by docs/stats.md: the geometric
    middle of [0.1 * 2**((index-1)/4), 0.1 * 2**(index/4))."""
    return round(0.1 * 2 ** ((2 * index - 1) / 8), 3)


def finish(run: Run, *, day: int, seconds: float, reason: str, tokens: tuple[int, int]) -> None:
    finished = START + dt.timedelta(days=day, hours=10)
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.DONE,
        status_reason=reason,
        due=False,
        started_at=None if reason == "cancelled" else finished - dt.timedelta(seconds=seconds),
        created_at=finished - dt.timedelta(seconds=seconds),
        finished_at=finished,
        input_tokens=tokens[0],
        output_tokens=tokens[1],
    )


def tool(run: Run, call_id: str, name: str, status: str, ms: int | None) -> None:
    moment = START + dt.timedelta(hours=12)
    ToolCall.objects.create(
        run=run,
        call_id=call_id,
        tool_name=name,
        status=status,
        duration_ms=ms,
        created_at=moment,
        updated_at=moment,
    )


@pytest.fixture
def dataset() -> dict[str, Any]:
    return build_dataset()


def build_dataset() -> dict[str, Any]:
    """Agent alpha (model m-alpha: $2 in, $10 out per million tokens): 1 s completed
    (1000/500 tokens), 10 s completed (2000/0), 100 s failed (0/100, day 2). Agent beta
    (model m-beta: $1 in, no output price): 5 s completed (3000/3000, day 2), a run
    cancelled before it started, 0.05 s after its creation (day 2). Tool calls: search
    succeeded in 0.2 s and 0.3 s and failed in 1.5 s, write_note succeeded untimed."""
    alpha = scripted_agent([{"text": "a"}], slug="alpha")
    beta = scripted_agent([{"text": "b"}], slug="beta")
    ModelFactory._meta.model.objects.filter(pk=alpha.model_id).update(
        slug="m-alpha", input_price_per_million_usd="2", output_price_per_million_usd="10"
    )
    ModelFactory._meta.model.objects.filter(pk=beta.model_id).update(
        slug="m-beta", input_price_per_million_usd="1"
    )
    for agent, model in ((alpha, "m-alpha"), (beta, "m-beta")):
        version = agent.versions.get()
        version.spec = {**version.spec, "model_id": model}
        version.save()
    runs = [run_start(agent=alpha, messages="hi") for _ in range(3)]
    runs += [run_start(agent=beta, messages="hi") for _ in range(2)]
    finish(runs[0], day=0, seconds=1.0, reason="natural", tokens=(1000, 500))
    finish(runs[1], day=0, seconds=10.0, reason="natural", tokens=(2000, 0))
    finish(runs[2], day=1, seconds=100.0, reason="error", tokens=(0, 100))
    finish(runs[3], day=1, seconds=5.0, reason="natural", tokens=(3000, 3000))
    finish(runs[4], day=1, seconds=0.05, reason="cancelled", tokens=(0, 0))
    tool(runs[0], "c1", "search", "succeeded", 200)
    tool(runs[0], "c2", "search", "failed", 1500)
    tool(runs[0], "c3", "write_note", "succeeded", None)
    tool(runs[3], "c4", "search", "succeeded", 300)
    Run.objects.filter(pk__in=[r.pk for r in runs]).update(
        input_price_per_million_usd=None, output_price_per_million_usd=None
    )
    Run.objects.filter(agent=alpha).update(
        input_price_per_million_usd=Decimal(2), output_price_per_million_usd=Decimal(10)
    )
    Run.objects.filter(agent=beta).update(input_price_per_million_usd=Decimal(1))
    stats.rebuild()
    return {"alpha": alpha, "beta": beta, "runs": runs}


def test_figures_match_the_hand_computed_ones(dataset: dict[str, Any]):
    figures = usage(START, END)
    alpha, beta = figures["by_agent"]
    assert (alpha["agent"], alpha["runs"], alpha["succeeded"]) == ("alpha", 3, 2)
    assert alpha["success_rate"] == 0.6667
    assert (alpha["input_tokens"], alpha["output_tokens"]) == (3000, 600)
    # 1000 * 2/1e6 + 500 * 10/1e6 + 2000 * 2/1e6 = 0.011 on day 1; 100 * 10/1e6 on day 2
    assert alpha["cost_usd"] == Decimal("0.012")
    assert [(d["day"], d["cost_usd"]) for d in alpha["cost_per_day"]] == [
        (DAY, Decimal("0.011")),
        (DAY + dt.timedelta(days=1), Decimal("0.001")),
    ]
    # 1 s, 10 s, 100 s fall in buckets 14, 27 and 40: the median is the 2nd, p95 the 3rd
    assert (alpha["p50_seconds"], alpha["p95_seconds"]) == (mid(27), mid(40))
    assert abs(alpha["p50_seconds"] - 10) / 10 < 0.091
    assert abs(alpha["p95_seconds"] - 100) / 100 < 0.091
    assert (beta["agent"], beta["runs"], beta["succeeded"], beta["success_rate"]) == (
        "beta",
        2,
        1,
        0.5,
    )
    assert (beta["input_tokens"], beta["output_tokens"]) == (3000, 3000)
    assert beta["cost_usd"] == Decimal("0.003")  # no output price: output tokens are free
    assert [d["cost_usd"] for d in beta["cost_per_day"]] == [Decimal(0), Decimal("0.003")]
    # 0.05 s is under the first bucket (reported as 0.05 s), 5 s falls in bucket 23
    assert (beta["p50_seconds"], beta["p95_seconds"]) == (0.05, mid(23))
    models = {row["model"]: row for row in figures["by_model"]}
    assert set(models) == {"m-alpha", "m-beta"}
    assert {k: v for k, v in models["m-alpha"].items() if k != "model"} == {
        k: v for k, v in alpha.items() if k != "agent"
    }
    assert models["m-beta"]["cost_usd"] == Decimal("0.003")
    search, note = figures["by_tool"]
    assert (search["tool"], search["calls"], search["failures"]) == ("search", 3, 1)
    assert search["failure_rate"] == 0.3333
    assert search["p95_seconds"] == mid(16)  # 1.5 s, the slowest of three
    assert (note["tool"], note["calls"], note["failures"], note["p95_seconds"]) == (
        "write_note",
        1,
        0,
        None,  # not timed
    )


def test_an_agent_filter_and_a_window_narrow_the_figures(dataset: dict[str, Any]):
    only_beta = usage(START, END, "beta")
    assert [row["agent"] for row in only_beta["by_agent"]] == ["beta"]
    assert [row["model"] for row in only_beta["by_model"]] == ["m-beta"]
    assert [(t["tool"], t["calls"], t["failures"]) for t in only_beta["by_tool"]] == [
        ("search", 1, 0)
    ]
    first_day = usage(START, START + dt.timedelta(days=1))
    assert [(row["agent"], row["runs"]) for row in first_day["by_agent"]] == [("alpha", 2)]
    assert first_day["by_agent"][0]["success_rate"] == 1.0


def test_percentile_buckets_are_log_spaced_and_within_nine_percent():
    assert stats.duration_bucket(0.0999) == 0
    assert stats.duration_bucket(0.1) == 1
    assert stats.duration_bucket(0.2) == 5  # four buckets per doubling
    assert stats.duration_bucket(10**9) == stats.DURATION_BUCKETS - 1
    for seconds in (0.15, 0.7, 3.3, 42.0, 999.0, 86_400.0):
        estimate = stats.percentile({stats.duration_bucket(seconds): 1}, 0.5)
        assert estimate is not None and abs(estimate - seconds) / seconds < 0.091
    assert stats.percentile({}, 0.5) is None
    assert stats.percentile({3: 1, 9: 19}, 0.05) == mid(3)
    assert stats.percentile({3: 1, 9: 19}, 0.06) == mid(9)


def test_the_checkpoint_keeps_the_counters_a_recount_finds():
    script = [
        {"text": "", "tool_calls": [call("write_note", {"title": "t", "body": "b"})]},
        {"text": "done"},
    ]
    agent = scripted_agent(script)
    run = drive(run_start(agent=agent, messages="note this"))
    assert run.status == Run.Status.DONE
    kept = {
        (r.hour, r.agent_id, r.kind, r.name, r.metric): r.count
        for r in HourlyUsage.objects.exclude(count=0)
    }
    assert kept == {key: n for key, n in stats.usage_counts().items() if n}
    assert kept[(stats.hour_of(run.finished_at), agent.pk, "tool", "write_note", "calls")] == 1
    assert ToolCall.objects.get(run=run).duration_ms is not None  # timed by the worker
    hour = stats.hour_of(run.finished_at)
    assert kept[(hour, agent.pk, "agent", "", "runs")] == 1
    assert kept[(hour, agent.pk, "agent", "", "succeeded")] == 1
    stats.rebuild()
    assert {
        (r.hour, r.agent_id, r.kind, r.name, r.metric): r.count for r in HourlyUsage.objects.all()
    } == kept


def test_api_needs_view_run_and_documents_its_figures(
    dataset: dict[str, Any], anonymous_api: Any, viewer_api: Any
):
    assert anonymous_api.get("/api/v1/stats").status_code == 401
    params = {"from": START.isoformat(), "to": END.isoformat(), "agent": "alpha"}
    response = viewer_api.get("/api/v1/stats", params)
    assert response.status_code == 200, response.content
    body = response.json()
    assert [row["agent"] for row in body["by_agent"]] == ["alpha"]
    alpha = body["by_agent"][0]
    assert (alpha["runs"], alpha["success_rate"], alpha["cost_usd"]) == (3, 0.6667, "0.012000000")
    assert [d["cost_usd"] for d in alpha["cost_per_day"]] == ["0.011000000", "0.001000000"]
    assert body["window"]["days"] == 2
    assert viewer_api.get("/api/v1/stats", {"window": "7d"}).status_code == 200
    assert viewer_api.get("/api/v1/stats", {"window": "1y"}).status_code == 400
    assert viewer_api.get("/api/v1/stats", {"from": START.isoformat()}).status_code == 400
    schema = viewer_api.get("/api/v1/schema/", {"format": "json"}).json()
    operation = schema["paths"]["/api/v1/stats"]["get"]
    assert {p["name"] for p in operation["parameters"]} >= {"window", "agent", "from", "to"}


def _queries(fetch: Any) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert fetch().status_code == 200
    return len(captured)


def test_api_and_dashboard_queries_do_not_grow_with_the_runs(
    dataset: dict[str, Any], viewer_api: Any, viewer_client: Any
):
    def api() -> Any:
        return viewer_api.get("/api/v1/stats", {"window": "30d"})

    def page() -> Any:
        return viewer_client.get(reverse("runs:dashboard"), {"window": "30d"})

    api(), page()  # warm: the token's and the user's first-request look-ups
    before = (_queries(api), _queries(page))
    for _ in range(5):
        extra = run_start(agent=dataset["beta"], messages="more")
        finish(extra, day=1, seconds=2.0, reason="natural", tokens=(10, 10))
        tool(extra, "x", "search", "failed", 100)
    stats.rebuild()
    api(), page()  # the rebuild's new counter rows: the settled hours are summed again
    assert (_queries(api), _queries(page)) == before
    # the token, the user, its permissions, the counters' generation, the two usage reads
    assert before[0] <= 5


def test_dashboard_draws_the_charts_with_axes_and_the_tables(
    dataset: dict[str, Any], viewer_client: Any
):
    # into the last 24 hours, so the 24 h window shows them
    ToolCall.objects.update(updated_at=timezone.now() - dt.timedelta(hours=1))
    Run.objects.update(finished_at=timezone.now() - dt.timedelta(hours=1))
    stats.rebuild()
    html = viewer_client.get(reverse("runs:dashboard"), {"window": "24h"}).content.decode()
    assert 'class="chart glance-cost"' in html and 'class="chart glance-durations"' in html
    for label in ("USD per day", "day the runs finished (UTC)", "seconds (first start to finish)"):
        assert label in html
    assert 'class="series-0"' in html and 'class="p95-bar"' in html
    assert ">alpha<" in html and ">m-beta<" in html and ">search<" in html
    assert "33 %" in html  # search's failure rate
    assert " style=" not in html.split('id="glance"')[1]
    default = viewer_client.get(reverse("runs:dashboard"), {"window": "<script>"})
    assert default.status_code == 400 and "<script>" not in default.content.decode()
    assert "&lt;script&gt;" in default.content.decode()  # named, escaped, above the charts


def test_the_glance_partial_refreshes_the_section_in_the_window_asked_for(
    dataset: dict[str, Any], viewer_client: Any
):
    url = reverse("runs:dashboard-glance")
    assert url == "/dashboard/glance"
    html = viewer_client.get(url, {"window": "30d"}, headers={"HX-Request": "true"})
    assert html.status_code == 200
    body = html.content.decode()
    assert body.lstrip().startswith('<section id="glance" class="glance">')  # the section alone
    assert "<html" not in body and 'id="dashboard-stats"' not in body
    assert 'class="chart glance-cost"' in body and 'class="chart glance-durations"' in body
    assert '<strong aria-current="true">last 30d</strong>' in body
    assert ">alpha<" in body and ">67 %<" in body  # alpha: 2 of its 3 runs completed
    assert " style=" not in body
    default = viewer_client.get(url, {"window": "<script>"}).content.decode()
    assert '<strong aria-current="true">last 7d</strong>' in default and "<script>" not in default


def test_the_glance_partial_needs_a_login_and_the_dashboard_permission(client: Any):
    from django.contrib.auth.models import User

    url = reverse("runs:dashboard-glance")
    response = client.get(url, {"window": "24h"})
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login") + "?next=")
    client.force_login(User.objects.create_user("nobody", password="pw"))  # no role
    assert client.get(url).status_code == 403
    assert client.get(reverse("runs:dashboard")).status_code == 403  # the same as the page


def test_the_dashboard_refetches_the_glance_on_a_clock_in_its_window(viewer_client: Any):
    html = viewer_client.get(reverse("runs:dashboard"), {"window": "24h"}).content.decode()
    wrapper = html.split('<div id="dashboard-glance"', 1)[1].split(">", 1)[0]
    assert f'data-refresh-url="{reverse("runs:dashboard-glance")}?window=24h"' in wrapper
    assert 'data-refresh-seconds="60"' in wrapper
    assert html.index('id="dashboard-glance"') < html.index('<section id="glance"')
    assert "js/live_stream.js" in html  # where [data-refresh-seconds] panels are refetched
    # outside the socket's panels: a run change does not refetch the hourly figures
    live = html.split("<div data-live", 1)[1].split('<div id="dashboard-glance"', 1)[0]
    assert "data-refresh-url" not in live


@pytest.mark.parametrize(
    ("peak", "top"), [(0, 1.0), (0.0018, 0.002), (1.234, 2), (2.1, 2.5), (3, 5), (10, 10), (0.7, 1)]
)
def test_axes_end_on_round_numbers(peak: float, top: float) -> None:
    assert nice_top(peak) == pytest.approx(top)
