"""A run's cost at the prices its model had when it was created: one computation, shown on
the run page and the API."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from agents.models import Model
from agents.pricing import cost_label, cost_text, cost_usd, price_snapshot, run_cost_usd
from runs.models import Run
from tests.factories import ProviderFactory, bearer, token_for, user_with_role

from .providers_support import agent_on, priced_model, run_to_end

pytestmark = pytest.mark.django_db


def priced_run(input_price: str | None, output_price: str | None, tokens=(1000, 2000)) -> Run:
    provider = ProviderFactory(slug="offline")
    model = priced_model(
        provider,
        slug=f"m-{input_price}-{output_price}".replace(".", "_").lower(),
        input_price=input_price,
        output_price=output_price,
        script=[{"text": "done"}],
    )
    run = run_to_end(agent_on(model))
    Run.objects.filter(pk=run.pk).update(input_tokens=tokens[0], output_tokens=tokens[1])
    return Run.objects.select_related("agent_version").get(pk=run.pk)


def test_cost_is_tokens_times_price_per_million():
    cost = cost_usd(
        input_tokens=1000,
        output_tokens=2000,
        input_price=Decimal("2.5"),
        output_price=Decimal("5"),
    )
    assert cost == Decimal("0.0125")
    assert cost_text(cost) == "0.0125" and cost_label(cost) == "$0.0125"
    both_unset = cost_usd(input_tokens=5, output_tokens=5, input_price=None, output_price=None)
    assert both_unset is None and cost_text(None) is None and cost_label(None) == "—"
    tiny = cost_usd(input_tokens=11, output_tokens=0, input_price=Decimal("2.5"), output_price=None)
    assert cost_text(tiny) == "0.0000275" and cost_label(tiny) == "<$0.0001"
    free = cost_usd(input_tokens=11, output_tokens=3, input_price=Decimal(0), output_price=None)
    assert cost_text(free) == "0" and cost_label(free) == "$0.0000"


def test_the_run_page_shows_the_cost_next_to_the_tokens(viewer_client):
    priced = priced_run("2.5", "5")
    unpriced = priced_run(None, None)

    page = viewer_client.get(reverse("runs:run-detail", args=[priced.pk])).content.decode()
    bare = viewer_client.get(reverse("runs:run-detail", args=[unpriced.pk])).content.decode()

    assert "tokens 1000 in / 2000 out · cost" in page
    assert (
        """<span id="run-cost" title="at its model's prices when the run was created">$0.0125</span>"""
        in page
    )
    assert (
        """<span id="run-cost" title="at its model's prices when the run was created">—</span>"""
        in bare
    )
    header = viewer_client.get(reverse("runs:run-header", args=[priced.pk])).content.decode()
    assert "$0.0125" in header


def test_the_api_shows_cost_usd_on_runs_and_the_run_list():
    api = bearer(token_for(user_with_role("viewer", "vic")))
    priced = priced_run("2.5", "5")
    unpriced = priced_run(None, None)

    assert api.get(f"/api/v1/runs/{priced.pk}").json()["cost_usd"] == "0.0125"
    assert api.get(f"/api/v1/runs/{unpriced.pk}").json()["cost_usd"] is None
    items = {item["run_id"]: item["cost_usd"] for item in api.get("/api/v1/runs").json()["items"]}
    assert items == {str(priced.pk): "0.0125", str(unpriced.pk): None}


def test_the_run_list_api_prices_a_page_with_one_query():
    api = bearer(token_for(user_with_role("viewer", "vic")))
    priced_run("2.5", "5")
    api.get("/api/v1/runs")  # the token's first use is recorded once
    with CaptureQueriesContext(connection) as few:
        assert api.get("/api/v1/runs").status_code == 200
    for index in range(6):
        priced_run(str(index + 1), "1")
    with CaptureQueriesContext(connection) as many:
        body = api.get("/api/v1/runs").json()
    assert len(body["items"]) == 7
    assert len(many) == len(few)


def test_a_run_keeps_the_prices_its_model_had_when_it_started():
    run = priced_run("1", "1")
    assert run_cost_usd(run) == Decimal("0.003")
    model = Model.objects.get(slug=run.agent_version.spec["model_id"])
    model.input_price_per_million_usd = Decimal("100")
    model.output_price_per_million_usd = None
    model.save()

    run.refresh_from_db()
    assert run_cost_usd(run) == Decimal("0.003")  # an old run's cost never moves
    later = run_to_end(run.agent)
    Run.objects.filter(pk=later.pk).update(input_tokens=1000, output_tokens=2000)
    later.refresh_from_db()
    assert run_cost_usd(later) == Decimal("0.1")  # new runs pay the new price


def test_a_version_whose_model_is_gone_or_remote_is_unpriced():
    assert price_snapshot({"model_id": "no-such-model"}) == {
        "input_price_per_million_usd": None,
        "output_price_per_million_usd": None,
    }
    assert price_snapshot({"endpoint_id": "remote"}) == price_snapshot(None)
    assert run_cost_usd(priced_run(None, None)) is None
