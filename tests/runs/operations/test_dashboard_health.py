"""The dashboard's "Providers and endpoints" panel: health, last error (escaped, truncated),
when it was checked, and the runs running, waiting on or failed by each — with links to
the runs list filtered the same way, and a query count that does not grow with the runs."""

from __future__ import annotations

import datetime as dt
import html
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from agents.models import AgentVersion, Health, ModelProvider, RemoteEndpoint
from runs.models import Run
from tests.agents.providers_support import agent_on, openai_provider, priced_model, run_to_end
from tests.factories import APPROVAL, ProviderFactory, call

pytestmark = pytest.mark.django_db

XSS = "<img src=x onerror=alert(1)>"
NOTE = [{"text": "noting", "tool_calls": [call("write_note", {"title": "t", "body": "b"})]}]


def world() -> dict[str, object]:
    """Two providers (one failing with a hostile, long error), one endpoint; runs that
    wait, run and fail on each."""
    offline = ProviderFactory(slug="offline", name="Offline models")
    waiter = agent_on(
        priced_model(offline, slug="waiter", script=NOTE), slug="waiter", permission=APPROVAL
    )
    waiter.tools = ["write_note"]
    waiter.save()
    AgentVersion.objects.filter(agent=waiter).update(
        spec={**AgentVersion.objects.get(agent=waiter).spec, "tools": ["write_note"]}
    )
    failer = agent_on(priced_model(offline, slug="failer", script=[{"error": "boom"}]))
    waiting = [run_to_end(waiter, "write a note") for _ in range(2)]
    failed = run_to_end(failer)
    old_failure = run_to_end(failer)
    Run.objects.filter(pk=old_failure.pk).update(created_at=timezone.now() - dt.timedelta(days=2))
    running = run_to_end(failer)
    Run.objects.filter(pk=running.pk).update(status=Run.Status.RUNNING, status_reason="")

    remote = openai_provider(None, slug="remote-llm", base_url="http://127.0.0.1:9/v1")
    ModelProvider.objects.filter(pk=remote.pk).update(
        health=Health.FAILING,
        health_error=f"provider error 401: {XSS} " + "x" * 300,
        health_checked_at=timezone.now() - dt.timedelta(minutes=5),
    )
    ModelProvider.objects.filter(pk=offline.pk).update(
        health=Health.HEALTHY, health_checked_at=timezone.now()
    )
    endpoint = RemoteEndpoint.objects.create(
        slug="partner", name="Partner agent", base_url="https://partner.example/a2a"
    )
    # a remote agent's version names its endpoint (spec "endpoint_id")
    delegate = agent_on(priced_model(offline, slug="relay", script=[{"error": "remote down"}]))
    remote_failed = run_to_end(delegate)
    version = remote_failed.agent_version
    AgentVersion.objects.filter(pk=version.pk).update(
        spec={**version.spec, "endpoint_id": endpoint.slug}
    )
    return {
        "waiting": waiting,
        "failed": failed,
        "old_failure": old_failure,
        "running": running,
        "remote_failed": remote_failed,
    }


def panel(page: str) -> str:
    start = page.index('id="dependency-health"')
    return page[start : page.index("</section>", start)]


def row(section: str, key: str) -> str:
    match = re.search(rf'<tr data-health="{key}">(.*?)</tr>', section, re.S)
    assert match, key
    return match.group(1)


def links(fragment: str) -> dict[str, str]:
    """{link text: href} for the count links of a row."""
    return {
        text: html.unescape(href)
        for href, text in re.findall(r'<a[^>]*href="([^"]+)"[^>]*>(\d+)</a>', fragment)
    }


def listed(client, href: str) -> set[str]:
    page = client.get(href).content.decode()
    return set(re.findall(r'id="run-row-([0-9a-f-]+)"', page))


def test_the_panel_shows_health_errors_and_dependent_runs(viewer_client):
    runs = world()

    page = viewer_client.get(reverse("runs:dashboard")).content.decode()
    section = panel(page)

    offline = row(section, "provider:offline")
    assert 'class="badge health-healthy">healthy<' in offline
    remote = row(section, "provider:remote-llm")
    assert 'class="badge health-failing">failing<' in remote
    assert XSS not in page and html.escape(XSS, quote=True)[:20] in remote
    assert "…" in remote  # the long error is truncated
    assert "5\xa0minutes ago" in remote
    partner = row(section, "endpoint:partner")
    assert 'class="badge health-unknown">unknown<' in partner and "never" in partner

    offline_links = links(offline)
    assert set(offline_links) == {"1", "2"}  # 1 running, 2 waiting; 2 failed (24 h) is below
    counts = re.findall(r"<td>(?:<a[^>]*>)?(?:<span[^>]*>)?(\d+)<", offline)
    assert counts == ["1", "2", "2"]  # running, waiting, failed in the last 24 hours
    hrefs = re.findall(r'href="([^"]+)"', offline)
    running_href, waiting_href, failed_href = (html.unescape(h) for h in hrefs)
    assert listed(viewer_client, running_href) == {str(runs["running"].pk)}
    assert listed(viewer_client, waiting_href) == {str(r.pk) for r in runs["waiting"]}
    assert listed(viewer_client, failed_href) == {
        str(runs["failed"].pk),
        str(runs["remote_failed"].pk),
    }
    assert str(runs["old_failure"].pk) not in listed(viewer_client, failed_href)

    partner_hrefs = [html.unescape(h) for h in re.findall(r'href="([^"]+)"', partner)]
    assert len(partner_hrefs) == 1 and "endpoint=partner" in partner_hrefs[0]
    assert listed(viewer_client, partner_hrefs[0]) == {str(runs["remote_failed"].pk)}
    assert re.findall(r'href="', remote) == []  # no runs depend on it: plain zeros


def test_the_filtered_runs_list_keeps_its_provider_filter(viewer_client):
    world()

    page = viewer_client.get(reverse("runs:run-list") + "?provider=offline&status=waiting").content
    text = page.decode()

    assert '<input type="hidden" name="provider" value="offline">' in text
    assert text.count('id="run-row-') == 2
    nothing = viewer_client.get(reverse("runs:run-list") + "?provider=remote-llm").content.decode()
    assert "No runs match." in nothing


def test_the_panel_costs_the_same_queries_however_many_runs(viewer_client):
    world()
    url = reverse("runs:dashboard-stats")
    with CaptureQueriesContext(connection) as few:
        assert viewer_client.get(url).status_code == 200
    failer = agent_on(
        priced_model(ProviderFactory(slug="offline"), slug="more", script=[{"error": "x"}])
    )
    for _ in range(5):
        run_to_end(failer)
    with CaptureQueriesContext(connection) as many:
        page = viewer_client.get(url).content.decode()
    assert len(many) == len(few)
    assert (
        re.findall(
            r"<td>(?:<a[^>]*>)?(?:<span[^>]*>)?(\d+)<", row(panel(page), "provider:offline")
        )[2]
        == "7"
    )


def test_no_providers_or_endpoints_says_so(viewer_client):
    assert (
        "No model providers, remote endpoints or MCP servers are configured."
        in viewer_client.get(reverse("runs:dashboard")).content.decode()
    )
