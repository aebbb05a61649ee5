"""The pages of the run core show what the apps above it own through hooks they declare
(settings), not imports: the runs list's failure-group filter (AWAKEN_RUN_LIST_SCOPES),
the dashboard's figures pushed by the core's websocket (AWAKEN_DASHBOARD_FIGURES) and
the pages with saved views (AWAKEN_SAVED_VIEW_PAGES). Each test points a hook at this
module and checks the core calls it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, QueryDict
from django.urls import reverse
from django.utils.module_loading import import_string

from runs import consumers
from runs.accounts.models.saved_views import SavedView
from runs.models import Run
from runs.operations.selectors.failures import FailureGroupScope
from runs.operations.views.dashboard import dashboard_figures_html
from runs.selectors import runs as selectors
from runs.selectors.base import Page, keyset_page
from runs.services.submission_flow import run_start
from runs.views.forms import FormError
from tests.factories import scripted_agent
from tests.runs.helpers import drive

pytestmark = pytest.mark.django_db

HERE = __name__


@dataclass(frozen=True)
class OneRunScope:
    """A scope of exactly the run named by the parameter's value."""

    run_id: str

    def narrow(self, runs: QuerySet[Run]) -> QuerySet[Run]:
        return runs.filter(pk=self.run_id)

    def page(self, runs: QuerySet[Run], cursor: str | None, size: int) -> Page:
        return keyset_page(self.narrow(runs), cursor, size)


def test_the_failure_group_filter_is_the_scope_operations_declares():
    scope = selectors.RunFilters(failure_group="0197").scope
    assert isinstance(scope, FailureGroupScope) and scope.group == "0197"
    assert selectors.RunFilters().scope is None  # no value: no scope, no lookup


def test_the_runs_list_narrows_and_pages_by_the_declared_scope(settings):
    agent = scripted_agent([{"text": "noted"}])
    first, second = (drive(run_start(agent=agent, messages=f"note {n}")) for n in range(2))
    settings.AWAKEN_RUN_LIST_SCOPES = {"failure_group": f"{HERE}.OneRunScope"}
    filters = selectors.RunFilters(failure_group=str(first.pk))
    assert [run.pk for run in selectors.run_list(filters=filters).items] == [first.pk]
    narrowed = selectors.filter_runs(selectors.runs_for_list(), filters)
    assert list(narrowed.values_list("pk", flat=True)) == [first.pk]
    settings.AWAKEN_RUN_LIST_SCOPES = {}  # nobody declares it: the parameter narrows nothing
    shown = {run.pk for run in selectors.run_list(filters=filters).items}
    assert shown == {first.pk, second.pk}


def figures() -> str:
    return "<b>figures from the hook</b>"


def test_the_websocket_pushes_the_figures_the_declared_renderer_makes(settings):
    settings.AWAKEN_DASHBOARD_FIGURES = f"{HERE}.figures"
    assert async_to_sync(consumers._render_figures)() == figures()


def test_the_default_figures_are_the_operations_dashboard_panel(settings):
    renderer = import_string(settings.AWAKEN_DASHBOARD_FIGURES)
    assert renderer is dashboard_figures_html
    html = renderer()
    assert "Recent failures" in html and "No open failures." in html


def filter_problems(params: QueryDict) -> list[str]:
    return [f"refused {params.get('status', '')} here"]


def error_page(request: HttpRequest, error: FormError) -> HttpResponse:
    return HttpResponse(f"hook page: {error.text}", status=400)


def test_a_saved_view_is_checked_and_refused_by_its_pages_declared_module(
    operator_client: Any, settings: Any
):
    url = reverse("runs:saved-view-save", args=["runs"])
    settings.AWAKEN_SAVED_VIEW_PAGES = {**settings.AWAKEN_SAVED_VIEW_PAGES, "runs": HERE}
    response = operator_client.post(url, {"name": "mine", "query": "status=done"})
    assert response.status_code == 400
    assert response.content.decode().startswith("hook page: Not saved")
    assert "refused done here" in response.content.decode()
    assert not SavedView.objects.exists()
