"""The configuration pages (schedules, notification routes and channels) in the product's
look: a team's operators and admins manage its schedules (only admins delete one), its
admins its routes, viewers read (operators read routes), another team's rows are a 404, a frozen team's wait for the freeze; shared routes and channels are the
site-wide admins'; channel URLs and secrets stay write-only; every change audited like
the admin's; the admin's validation is the page's (an invalid cron expression is refused
with the same message on both); the raw run tables of the admin are the superusers'."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils.html import escape

from common.audit import Actor
from common.models import AuditEntry
from common.teams import team_freeze
from runs.models import Run, Schedule
from runs.operations.models.notifications import NotificationChannel, NotificationRule
from runs.operations.services.notify_send import channel_secret
from runs.operations.services.schedules import schedule_config_errors, schedule_plan
from tests.factories import (
    AgentFactory,
    scripted_agent,
    superuser,
    team,
    team_member,
    user_with_role,
)
from tests.runs.helpers import schedule_form as form_data
from tests.runs.notify_helpers import notify_configured_fixture  # noqa: F401 (autouse)

pytestmark = pytest.mark.django_db

XSS = "<img src=x onerror=alert(1)>"
OPS = Actor(label="ops", source="ui")


def client_of(user: Any, staff: bool = False) -> Client:
    if staff:
        user.is_staff = True
        user.save(update_fields=["is_staff"])
    client = Client()
    client.force_login(user)
    return client


def agent_of(slug: str) -> Any:
    return scripted_agent([{"text": "ok"}], slug=f"{slug}-agent", team=team(slug))


def make(slug: str = "red", name: str = "nightly", **fields: Any) -> Schedule:
    schedule = Schedule(
        name=name,
        agent=agent_of(slug) if "agent" not in fields else fields.pop("agent"),
        message="report",
        kind="interval",
        interval_seconds=600,
        timezone="UTC",
        **fields,
    )
    schedule_plan(schedule)
    schedule.save()
    return schedule


def fresh(schedule: Schedule) -> Schedule:
    return Schedule.objects.get(pk=schedule.pk)


# --- schedules: who sees and does what ---------------------------------------------------------


def test_the_list_shows_the_teams_schedules_and_the_actions_the_role_allows():
    red = make("red", name=f"red {XSS}")
    make("blue", name="blue-nightly")
    admin = client_of(team_member("admin", "red"))
    page = admin.get(reverse("runs:schedules")).content.decode()
    assert "red &lt;img src=x" in page and XSS not in page
    assert "blue-nightly" not in page
    assert reverse("runs:schedule-pause", args=[red.pk]) in page
    assert reverse("runs:schedule-run-now", args=[red.pk]) in page
    assert reverse("runs:schedule-new") in page
    assert 'href="/schedules/"' in page  # the nav entry
    operator = client_of(team_member("operator", "red"))
    page = operator.get(reverse("runs:schedules")).content.decode()
    assert "red &lt;img src=x" in page and XSS not in page
    for url in (
        reverse("runs:schedule-pause", args=[red.pk]),
        reverse("runs:schedule-run-now", args=[red.pk]),
        reverse("runs:schedule-edit", args=[red.pk]),
        reverse("runs:schedule-new"),
    ):
        assert url in page, url
    page = client_of(team_member("viewer", "red")).get(reverse("runs:schedules")).content.decode()
    assert "red &lt;img src=x" in page
    assert reverse("runs:schedule-pause", args=[red.pk]) not in page
    assert reverse("runs:schedule-run-now", args=[red.pk]) not in page
    assert reverse("runs:schedule-new") not in page


@pytest.mark.parametrize("role", ["operator", "admin"])
def test_another_teams_schedule_is_a_404_on_every_page_and_action(role):
    blue = make("blue", name="blue-nightly")
    admin = client_of(team_member(role, "red"))
    assert admin.get(reverse("runs:schedule-detail", args=[blue.pk])).status_code == 404
    assert admin.get(reverse("runs:schedule-edit", args=[blue.pk])).status_code == 404
    for name in ("schedule-pause", "schedule-run-now", "schedule-delete"):
        assert admin.post(reverse(f"runs:{name}", args=[blue.pk])).status_code == 404
    assert fresh(blue).enabled and not Run.objects.exists()
    assert not AuditEntry.objects.filter(target_type="schedule").exists()


def test_viewers_read_but_may_not_change_pause_run_or_delete():
    schedule = make("red")
    client = client_of(team_member("viewer", "red"))
    page = client.get(reverse("runs:schedule-detail", args=[schedule.pk]))
    assert page.status_code == 200 and "Last 10 runs" in page.content.decode()
    assert client.get(reverse("runs:schedule-new")).status_code == 403
    assert client.post(reverse("runs:schedule-new"), form_data(schedule.agent)).status_code == 403
    assert client.get(reverse("runs:schedule-edit", args=[schedule.pk])).status_code == 403
    for name in ("schedule-pause", "schedule-resume", "schedule-run-now", "schedule-delete"):
        response = client.post(reverse(f"runs:{name}", args=[schedule.pk]))
        assert response.status_code == 403, name
    assert fresh(schedule).enabled and not Run.objects.exists()
    assert not AuditEntry.objects.filter(target_type="schedule").exists()


def test_an_operator_creates_edits_pauses_resumes_and_runs_now_but_may_not_delete():
    agent = agent_of("red")
    client = client_of(team_member("operator", "red", username="olga"))
    assert client.get(reverse("runs:schedule-new")).status_code == 200
    assert client.post(reverse("runs:schedule-new"), form_data(agent)).status_code == 302
    schedule = Schedule.objects.get(name="morning report")
    assert schedule.created_by.username == "olga"
    detail = reverse("runs:schedule-detail", args=[schedule.pk])
    page = client.get(detail).content.decode()
    assert ">Pause</button>" in page and "Run now" in page
    assert reverse("runs:schedule-edit", args=[schedule.pk]) in page
    assert reverse("runs:schedule-delete", args=[schedule.pk]) not in page  # an admin's
    edit = reverse("runs:schedule-edit", args=[schedule.pk])
    assert client.get(edit).status_code == 200
    assert client.post(edit, form_data(agent, name="renamed")).status_code == 302
    assert client.post(reverse("runs:schedule-pause", args=[schedule.pk])).status_code == 302
    assert not fresh(schedule).enabled
    assert client.post(reverse("runs:schedule-resume", args=[schedule.pk])).status_code == 302
    assert fresh(schedule).enabled and fresh(schedule).next_run_at is not None
    assert client.post(reverse("runs:schedule-run-now", args=[schedule.pk])).status_code == 302
    assert Run.objects.filter(schedule=schedule).count() == 1
    refused = client.post(reverse("runs:schedule-delete", args=[schedule.pk]))
    assert refused.status_code == 403
    assert Schedule.objects.filter(pk=schedule.pk).exists()
    actions = AuditEntry.objects.filter(target_type="schedule").order_by("id")
    assert [(e.action, e.actor_label) for e in actions] == [
        (action, "olga")
        for action in (
            "schedule.create",
            "schedule.update",
            "schedule.pause",
            "schedule.resume",
            "schedule.run_now",
        )
    ]
    admin_page = client_of(team_member("admin", "red")).get(detail).content.decode()
    assert reverse("runs:schedule-delete", args=[schedule.pk]) in admin_page


def test_a_team_admin_creates_a_schedule_planned_and_audited_for_the_team():
    agent = agent_of("red")
    admin = client_of(team_member("admin", "red", username="ada"))
    assert admin.get(reverse("runs:schedule-new")).status_code == 200
    response = admin.post(reverse("runs:schedule-new"), form_data(agent))
    schedule = Schedule.objects.get(name="morning report")
    assert response.status_code == 302
    assert response["Location"] == reverse("runs:schedule-detail", args=[schedule.pk])
    assert schedule.next_run_at is not None and schedule.created_by.username == "ada"
    entry = AuditEntry.objects.get(action="schedule.create")
    assert (entry.actor_label, entry.source, entry.team_id) == ("ada", "ui", agent.team_id)
    assert entry.after["cron"] == "0 9 * * 1-5"


def test_a_team_admin_may_not_put_a_schedule_on_another_teams_agent():
    blue_agent = agent_of("blue")
    admin = client_of(team_member("admin", "red"))
    response = admin.post(reverse("runs:schedule-new"), form_data(blue_agent))
    assert response.status_code == 400
    assert "Select a valid choice" in response.content.decode()
    assert "blue-agent" not in response.content.decode()
    assert not Schedule.objects.exists() and not AuditEntry.objects.exists()


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"cron": "0 25 * * *"}, "cron"),
        ({"cron": "*/5 * * *"}, "cron"),
        ({"timezone": "Europe/Atlantis"}, "timezone"),
        ({"kind": "interval", "cron": ""}, "interval_seconds"),
        ({"kind": "interval", "interval_seconds": "0", "cron": ""}, "interval_seconds"),
    ],
)
def test_an_invalid_schedule_is_refused_with_the_same_message_on_the_page_and_in_the_admin(
    fields, field
):
    agent = agent_of("red")
    sent = {**form_data(agent), **fields}
    checked = {name: sent[name] for name in ("kind", "cron", "timezone", "message")}
    candidate = Schedule(agent=agent, interval_seconds=None, **checked)
    message = escape(schedule_config_errors(candidate)[field])
    admin_user = team_member("admin", "red", username="ada")
    client = client_of(admin_user, staff=True)
    page = client.post(reverse("runs:schedule-new"), form_data(agent, **fields))
    assert page.status_code == 400
    shown = re.search(
        rf'id="field-{field}".*?<span class="field-error" role="alert">(.*?)</span>',
        page.content.decode(),
        re.S,
    )
    assert shown and shown[1] == message
    in_admin = client.post(reverse("admin:runs_schedule_add"), form_data(agent, **fields))
    assert in_admin.status_code == 200
    listed = re.search(
        rf'field-{field}.*?<ul class="errorlist[^"]*"[^>]*><li>(.*?)</li>',
        in_admin.content.decode(),
        re.S,
    )
    assert listed and listed[1] == message
    assert not Schedule.objects.exists() and not AuditEntry.objects.exists()


def test_an_agent_never_published_is_refused_on_the_page_as_in_the_admin():
    draft = AgentFactory(slug="draft-only", published=False, team=team("red"))
    client = client_of(team_member("admin", "red"))
    response = client.post(reverse("runs:schedule-new"), form_data(draft))
    assert response.status_code == 400
    assert "Agent &#x27;draft-only&#x27; has no published version" in response.content.decode()


def test_editing_keeps_what_a_firing_set_and_is_audited():
    schedule = make("red")
    Schedule.objects.filter(pk=schedule.pk).update(last_outcome="started run x")
    client = client_of(team_member("admin", "red"))
    edit = reverse("runs:schedule-edit", args=[schedule.pk])
    assert client.get(edit).status_code == 200
    data = form_data(schedule.agent, name="renamed", kind="interval", interval_seconds=60, cron="")
    assert client.post(edit, data).status_code == 302
    changed = fresh(schedule)
    assert (changed.name, changed.interval_seconds, changed.last_outcome) == (
        "renamed",
        60,
        "started run x",
    )
    entry = AuditEntry.objects.get(action="schedule.update")
    assert (entry.before["name"], entry.after["name"]) == ("nightly", "renamed")
    assert entry.team_id == schedule.agent.team_id


def test_pause_resume_run_now_and_delete_from_the_page_are_audited():
    schedule = make("red")
    client = client_of(team_member("admin", "red"))
    detail = reverse("runs:schedule-detail", args=[schedule.pk])
    assert client.post(reverse("runs:schedule-pause", args=[schedule.pk]))["Location"] == detail
    assert (fresh(schedule).enabled, fresh(schedule).next_run_at) == (False, None)
    page = client.get(detail).content.decode()
    assert "Paused nightly" in page and ">Resume</button>" in page
    listed = client.post(reverse("runs:schedule-resume", args=[schedule.pk]), {"from": "list"})
    assert listed["Location"] == reverse("runs:schedules")
    assert fresh(schedule).enabled and fresh(schedule).next_run_at is not None
    client.post(reverse("runs:schedule-run-now", args=[schedule.pk]))
    (run,) = Run.objects.filter(schedule=schedule)
    page = client.get(detail).content.decode()
    assert reverse("runs:run-detail", args=[run.pk]) in page  # in its last runs
    client.post(reverse("runs:schedule-delete", args=[schedule.pk]))
    assert not Schedule.objects.filter(pk=schedule.pk).exists()
    assert Run.objects.filter(pk=run.pk).exists()
    actions = AuditEntry.objects.filter(target_type="schedule").order_by("id")
    assert [(e.action, e.team_id) for e in actions] == [
        (action, schedule.agent.team_id)
        for action in ("schedule.pause", "schedule.resume", "schedule.run_now", "schedule.delete")
    ]


def test_a_frozen_teams_schedule_shows_why_and_refuses_changes():
    schedule = make("red")
    client = client_of(team_member("admin", "red"))
    team_freeze(team=team("red"), actor=OPS, reason="incident 7")
    page = client.get(reverse("runs:schedule-detail", args=[schedule.pk])).content.decode()
    assert "incident 7" in page and "disabled" in page
    response = client.post(reverse("runs:schedule-pause", args=[schedule.pk]))
    assert response.status_code == 409 and "incident 7" in response.content.decode()
    edit = reverse("runs:schedule-edit", args=[schedule.pk])
    response = client.post(edit, form_data(schedule.agent, name="renamed"))
    assert response.status_code == 409 and "is frozen" in response.content.decode()
    assert fresh(schedule).enabled and fresh(schedule).name == "nightly"
    assert not AuditEntry.objects.filter(target_type="schedule").exists()


# --- notification routes -----------------------------------------------------------------------


def mailbox(name: str = "ops mailbox") -> NotificationChannel:
    return NotificationChannel.objects.create(name=name, kind="email", email_to="ops@example.com")


def test_a_team_admin_routes_their_agents_events_and_it_is_audited():
    channel = mailbox()
    agent = agent_of("red")
    client = client_of(team_member("admin", "red", username="ada"))
    assert client.get(reverse("runs:notification-route-new")).status_code == 200
    data = {"channel": channel.pk, "events": ["run.failed"], "agent": agent.pk, "enabled": "on"}
    response = client.post(reverse("runs:notification-route-new"), data)
    assert response.status_code == 302, response.content.decode()[:2000]
    rule = NotificationRule.objects.get()
    assert (rule.agent, rule.events) == (agent, ["run.failed"])
    entry = AuditEntry.objects.get(action="notificationrule.create")
    assert (entry.actor_label, entry.team_id, entry.source) == ("ada", agent.team_id, "ui")
    page = client.get(reverse("runs:notification-routes")).content.decode()
    assert "a run fails" in page and "ops mailbox" in page
    edit = reverse("runs:notification-route-edit", args=[rule.pk])
    assert client.post(edit, {**data, "tool": "", "events": []}).status_code == 302
    assert NotificationRule.objects.get().events == []
    assert client.post(reverse("runs:notification-route-delete", args=[rule.pk])).status_code == 302
    assert not NotificationRule.objects.exists()
    actions = AuditEntry.objects.filter(target_type="notificationrule").order_by("id")
    assert [e.action for e in actions] == [
        "notificationrule.create",
        "notificationrule.update",
        "notificationrule.delete",
    ]


def test_shared_routes_are_for_site_wide_admins_and_another_teams_route_is_a_404():
    channel = mailbox()
    shared = NotificationRule.objects.create(channel=channel)
    blue = NotificationRule.objects.create(channel=channel, agent=agent_of("blue"))
    red_agent = agent_of("red")
    client = client_of(team_member("admin", "red"))
    page = client.get(reverse("runs:notification-routes")).content.decode()
    assert f'data-route="{shared.pk}"' in page and f'data-route="{blue.pk}"' not in page
    assert reverse("runs:notification-route-edit", args=[shared.pk]) not in page
    assert client.get(reverse("runs:notification-route-edit", args=[shared.pk])).status_code == 403
    assert (
        client.post(reverse("runs:notification-route-delete", args=[shared.pk])).status_code == 403
    )
    assert client.get(reverse("runs:notification-route-edit", args=[blue.pk])).status_code == 404
    response = client.post(reverse("runs:notification-route-new"), {"channel": channel.pk})
    assert response.status_code == 400  # every agent: a shared route, not theirs to set
    assert NotificationRule.objects.count() == 2
    site = client_of(user_with_role("admin", "sam"))
    assert (
        site.post(reverse("runs:notification-route-new"), {"channel": channel.pk}).status_code
        == 302
    )
    assert NotificationRule.objects.filter(agent__isnull=True).count() == 2
    assert red_agent.team_id != blue.agent.team_id


def test_operators_see_routes_but_not_the_buttons_and_are_refused():
    rule = NotificationRule.objects.create(channel=mailbox(), agent=agent_of("red"))
    client = client_of(team_member("operator", "red"))
    page = client.get(reverse("runs:notification-routes")).content.decode()
    assert f'data-route="{rule.pk}"' in page
    assert reverse("runs:notification-route-edit", args=[rule.pk]) not in page
    assert client.get(reverse("runs:notification-route-new")).status_code == 403
    assert client.post(reverse("runs:notification-route-delete", args=[rule.pk])).status_code == 403
    assert NotificationRule.objects.filter(pk=rule.pk).exists()


def test_a_tool_pattern_on_run_events_is_refused_with_the_admins_message():
    channel, agent = mailbox(), agent_of("red")
    client = client_of(team_member("admin", "red"), staff=True)
    data = {"channel": channel.pk, "events": ["run.failed"], "agent": agent.pk, "tool": "send_*"}
    page = client.post(reverse("runs:notification-route-new"), data)
    in_admin = client.post(reverse("admin:operations_notificationrule_add"), data)
    message = escape("A tool pattern applies to ticket events only")
    assert page.status_code == 400 and message in page.content.decode()
    assert in_admin.status_code == 200 and message in in_admin.content.decode()
    assert not NotificationRule.objects.exists()


def test_a_frozen_teams_route_waits_for_the_freeze():
    rule = NotificationRule.objects.create(channel=mailbox(), agent=agent_of("red"))
    client = client_of(team_member("admin", "red"))
    team_freeze(team=team("red"), actor=OPS, reason="incident 9")
    response = client.post(reverse("runs:notification-route-delete", args=[rule.pk]))
    assert response.status_code == 409 and "incident 9" in response.content.decode()
    assert NotificationRule.objects.filter(pk=rule.pk).exists()


# --- the admin ---------------------------------------------------------------------------------


def test_the_raw_run_tables_are_hidden_in_the_admin_but_from_superusers():
    make("red")
    staff = client_of(user_with_role("admin", "sam"), staff=True)
    index = staff.get(reverse("admin:index")).content.decode()
    for model in ("runevent", "message", "run", "thread", "toolcall", "ticket", "decision"):
        url = reverse(f"admin:runs_{model}_changelist")
        assert url not in index, model
        assert staff.get(url).status_code == 403, model
    assert reverse("admin:runs_schedule_changelist") in index
    assert reverse("admin:common_auditentry_changelist") in index
    root = client_of(superuser())
    assert root.get(reverse("admin:runs_runevent_changelist")).status_code == 200
    assert (
        reverse("admin:runs_message_changelist")
        in root.get(reverse("admin:index")).content.decode()
    )


def test_the_admins_schedule_and_route_lists_link_to_the_pages():
    schedule = make("red")
    staff = client_of(user_with_role("admin", "sam"), staff=True)
    page = staff.get(reverse("admin:runs_schedule_changelist")).content.decode()
    assert reverse("runs:schedules") in page
    page = staff.get(reverse("admin:runs_schedule_change", args=[schedule.pk])).content.decode()
    assert reverse("runs:schedule-detail", args=[schedule.pk]) in page
    page = staff.get(reverse("admin:operations_notificationrule_changelist")).content.decode()
    assert reverse("runs:notification-routes") in page


def test_the_configuration_pages_show_no_raw_value():
    plain = pytest.importorskip("tests.runs.test_plain_wording")
    schedule = make("red", catch_up="once", thread_policy="same")
    client = client_of(team_member("admin", "red"))
    client.post(reverse("runs:schedule-run-now", args=[schedule.pk]))
    channel = mailbox()
    rule = NotificationRule.objects.create(
        channel=channel, agent=schedule.agent, events=["ticket.opened", "run.failed"]
    )
    pages = {
        reverse("runs:schedules"): 200,
        reverse("runs:schedule-detail", args=[schedule.pk]): 200,
        reverse("runs:schedule-edit", args=[schedule.pk]): 200,
        reverse("runs:notification-routes"): 200,
        reverse("runs:notification-route-edit", args=[rule.pk]): 200,
    }
    shown = {}
    for url, status in pages.items():
        response = client.get(url)
        assert response.status_code == status, url
        if found := plain.raw_values_shown(response.content.decode()):
            shown[url] = found
    response = client.post(reverse("runs:schedule-new"), form_data(schedule.agent, cron="x"))
    assert response.status_code == 400
    if found := plain.raw_values_shown(response.content.decode()):
        shown["schedule form with an error"] = found
    assert not shown, plain.summary(shown)


# --- notification channels ---------------------------------------------------------------------


def channel_form(**fields: Any) -> dict[str, Any]:
    return {
        "name": "ops hook",
        "kind": "webhook",
        "enabled": "on",
        "email_to": "",
        "url": "http://127.0.0.1:9/in?token=t0ps3cret",
        "signing_secret": "",
        **fields,
    }


def test_a_site_wide_admin_adds_a_channel_whose_url_and_secret_are_write_only():
    client = client_of(user_with_role("admin", "sam"))
    assert client.get(reverse("runs:notification-channel-new")).status_code == 200
    response = client.post(reverse("runs:notification-channel-new"), channel_form())
    assert response.status_code == 200 and "no-store" in response["Cache-Control"]
    hook = NotificationChannel.objects.get()
    secret = channel_secret(hook)
    assert secret.startswith("whsec_") and secret in response.content.decode()
    entry = AuditEntry.objects.get(action="notificationchannel.create")
    assert (entry.after["url_stored"], entry.after["signing_secret_stored"]) == (True, True)
    assert "t0ps3cret" not in str(entry.after) and secret not in str(entry.after)
    edit = reverse("runs:notification-channel-edit", args=[hook.pk])
    page = client.get(edit).content.decode()
    assert "t0ps3cret" not in page and secret not in page and "A URL is stored" in page
    listing = client.get(reverse("runs:notification-routes")).content.decode()
    assert "t0ps3cret" not in listing and secret not in listing and "ops hook" in listing
    # blank: the stored URL and secret are kept
    assert client.post(edit, channel_form(name="ops hook 2", url="")).status_code == 302
    kept = NotificationChannel.objects.get()
    assert (kept.name, kept.url_encrypted, channel_secret(kept)) == (
        "ops hook 2",
        hook.url_encrypted,
        secret,
    )
    refused = client.post(edit, channel_form(kind="email", url=""))
    assert refused.status_code == 400
    assert "Enter one or more addresses" in refused.content.decode()


def test_team_admins_see_the_channels_but_only_site_wide_admins_change_them():
    channel = mailbox()
    NotificationRule.objects.create(channel=channel, agent=agent_of("red"))
    client = client_of(team_member("admin", "red"))
    page = client.get(reverse("runs:notification-routes")).content.decode()
    assert f'data-channel="{channel.pk}"' in page
    assert reverse("runs:notification-channel-edit", args=[channel.pk]) not in page
    assert reverse("runs:notification-channel-new") not in page
    assert client.get(reverse("runs:notification-channel-new")).status_code == 403
    assert (
        client.get(reverse("runs:notification-channel-edit", args=[channel.pk])).status_code == 403
    )
    delete = reverse("runs:notification-channel-delete", args=[channel.pk])
    assert client.post(delete).status_code == 403
    assert NotificationChannel.objects.filter(pk=channel.pk).exists()
    site = client_of(user_with_role("admin", "sam"))
    assert site.post(delete).status_code == 302
    assert not NotificationChannel.objects.exists() and not NotificationRule.objects.exists()
    entry = AuditEntry.objects.get(action="notificationchannel.delete")
    assert entry.comment == "with 1 route(s)"


def test_the_lists_read_as_many_queries_for_many_rows_as_for_one():
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = client_of(user_with_role("admin", "sam"))
    channel = mailbox()

    def counted(url: str) -> int:
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url).status_code == 200
        return len(queries.captured_queries)

    make("red", name="first")
    NotificationRule.objects.create(channel=channel, agent=Schedule.objects.get().agent)
    one = (counted(reverse("runs:schedules")), counted(reverse("runs:notification-routes")))
    for index, slug in enumerate(["blue", "green", "amber", "teal"]):
        schedule = make(slug, name=f"more-{index}")
        client.post(reverse("runs:schedule-run-now", args=[schedule.pk]))
        NotificationRule.objects.create(channel=mailbox(f"box {index}"), agent=schedule.agent)
    many = (counted(reverse("runs:schedules")), counted(reverse("runs:notification-routes")))
    assert many == one


def test_the_team_page_links_to_its_schedules_and_the_routes():
    client = client_of(team_member("viewer", "red"))
    page = client.get(reverse("runs:team-detail", args=["red"])).content.decode()
    assert f"{reverse('runs:schedules')}?team=red" in page
    assert reverse("runs:notification-routes") in page
    make("red", name="red-nightly")
    make("blue", name="blue-nightly")
    admin = client_of(user_with_role("admin", "sam"))
    listing = admin.get(reverse("runs:schedules"), {"team": "red"}).content.decode()
    assert "red-nightly" in listing and "blue-nightly" not in listing
