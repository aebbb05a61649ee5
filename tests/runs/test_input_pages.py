"""Run control on the pages: the thread page's composer (modes, priority), its pending
input (edit, retract), "Interrupt thread", the run page's priority, schedule badge and
steer input, the live panels; permissions and escaping."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.test import Client
from django.urls import reverse

from runs.models import PendingInput, Run, Schedule
from runs.services.submission_flow import input_submit
from tests.factories import done_run, scripted_agent, user_with_role, waiting_run
from tests.runs.helpers import drive

pytestmark = pytest.mark.django_db

XSS = "<script>alert(1)</script>"


def busy_run() -> Run:
    """A thread whose open run is created (no worker took it in these tests)."""
    run = input_submit(agent=scripted_agent([{"text": "ok"}], slug="greeter"), messages="go").run
    assert run is not None and run.status == "created"
    return run


def queue(run: Run, text: str = "after that", **kwargs) -> PendingInput:
    outcome = input_submit(agent=None, messages=text, thread=run.thread, **kwargs)
    assert outcome.input.status == "pending"
    return outcome.input


def thread_page(client, run: Run) -> str:
    response = client.get(reverse("runs:thread-detail", args=[run.thread_id]))
    assert response.status_code == 200
    return response.content.decode()


def modes(page: str) -> list[str]:
    select = re.search(r'<select name="mode" data-mode-select>(.*?)</select>', page, re.S)
    return re.findall(r'<option value="([a-z_]+)"', select[1]) if select else []


# --- the thread page --------------------------------------------------------------------------


def test_the_composer_offers_the_modes_of_the_threads_state(operator_client):
    done = done_run()
    page = thread_page(operator_client, done)
    assert modes(page) == [] and 'name="priority"' in page  # idle: a message starts a run

    busy = busy_run()
    page = thread_page(operator_client, busy)
    assert modes(page) == ["queue", "steer", "interrupt_then_queue"]
    assert '<option value="queue" selected>' in page
    assert "starts the thread&#x27;s next run when the open run ends" in page  # help text
    assert 'name="priority" min="0" max="255" value="128"' in page

    waiting = waiting_run()
    page = thread_page(operator_client, waiting)
    assert modes(page) == ["queue", "steer", "interrupt_then_queue", "resume_open_run"]
    # the confirmation of the tickets a resume rejects shows only for that mode
    assert re.search(r'data-mode-only="resume_open_run" hidden disabled>', page)


def test_the_pending_section_lists_inputs_in_order_with_their_controls(operator_client):
    run = busy_run()
    first = queue(run, "first thing", priority=9)
    second = queue(run, "second thing", mode="steer")
    page = thread_page(operator_client, run)
    assert page.index("first thing") < page.index("second thing")
    assert f'id="input-{first.pk}"' in page and "priority 9" in page
    assert f'into run <a class="mono" href="/runs/{run.pk}/">' in page  # the steer's target
    assert (
        "by system" in page
        and '<b title="queue">Queued</b>' in page
        and '<b title="steer">Steer</b>' in page
    )
    assert reverse("runs:input-edit", args=[first.pk]) in page
    assert reverse("runs:input-retract", args=[second.pk]) in page
    assert 'data-confirm="Retract input #3? It will never be delivered."' in page
    assert reverse("runs:thread-interrupt", args=[run.thread_id]) in page
    assert 'data-refresh-url="/threads/' in page and "data-live" in page


def test_a_viewer_sees_the_pending_input_but_no_controls(viewer_client):
    run = busy_run()
    input_ = queue(run, "look but do not touch")
    page = thread_page(viewer_client, run)
    assert "look but do not touch" in page
    assert "<textarea" not in page and "Retract" not in page and "Interrupt thread" not in page
    for url, data in [
        (reverse("runs:input-edit", args=[input_.pk]), {"message": "x"}),
        (reverse("runs:input-retract", args=[input_.pk]), {}),
        (reverse("runs:thread-interrupt", args=[run.thread_id]), {}),
        (reverse("runs:run-priority", args=[run.pk]), {"priority": "1"}),
        (reverse("runs:thread-send", args=[run.thread_id]), {"agent": "greeter", "message": "x"}),
    ]:
        assert viewer_client.post(url, data).status_code == 403, url
    input_.refresh_from_db()
    assert (input_.status, input_.text) == ("pending", "look but do not touch")
    assert Run.objects.get(pk=run.pk).status == "created"


def test_sending_in_each_mode(operator_client):
    run = busy_run()
    url = reverse("runs:thread-send", args=[run.thread_id])
    form = {"agent": "greeter", "message": "queued one", "priority": "12"}
    response = operator_client.post(url, form)
    assert response.status_code == 302 and response["Location"].endswith(
        f"/threads/{run.thread_id}/"
    )
    queued = PendingInput.objects.get(thread=run.thread, seq=2)
    assert (queued.mode, queued.status, queued.priority) == ("queue", "pending", 12)
    page = operator_client.get(response["Location"]).content.decode()
    assert "Input #2 is queued" in page

    operator_client.post(url, {**form, "message": "steer me", "mode": "steer"})
    steer = PendingInput.objects.get(thread=run.thread, seq=3)
    assert (steer.mode, steer.run_id) == ("steer", run.pk)

    response = operator_client.post(
        url, {**form, "message": "instead", "mode": "interrupt_then_queue"}
    )
    run.refresh_from_db()
    assert (run.status, run.status_reason) == ("done", "cancelled")
    nxt = Run.objects.exclude(pk=run.pk).get(thread=run.thread)  # the oldest input starts
    assert PendingInput.objects.get(thread=run.thread, seq=2).delivered_run_id == nxt.pk
    assert response["Location"].endswith(f"/threads/{run.thread_id}/")
    page = operator_client.get(response["Location"]).content.decode()
    assert "The open run was cancelled; input #4 is queued" in page


def test_a_message_to_an_idle_thread_starts_a_run_whatever_the_mode(operator_client):
    done = done_run()
    url = reverse("runs:thread-send", args=[done.thread_id])
    form = {"agent": done.agent.slug, "message": "now", "mode": "steer", "priority": "2"}
    response = operator_client.post(url, form)
    started = Run.objects.exclude(pk=done.pk).get(thread_id=done.thread_id)
    assert response["Location"].endswith(f"/runs/{started.pk}/") and started.priority == 2


def test_a_bad_priority_or_mode_sends_nothing(operator_client):
    run = busy_run()
    url = reverse("runs:thread-send", args=[run.thread_id])
    for extra, said in [
        ({"priority": "300"}, "priority must be an integer from 0"),
        ({"priority": "high"}, "priority must be an integer from 0"),
        ({"mode": "later"}, "mode must be one of"),
    ]:
        response = operator_client.post(url, {"agent": "greeter", "message": "x", **extra})
        assert response.status_code == 400  # the thread page, the message in the composer
        assert said in unescape(response.content.decode())
    assert PendingInput.objects.filter(thread=run.thread).count() == 1


def test_interrupt_then_queue_needs_the_cancel_permission(client):
    from django.contrib.auth.models import Permission, User

    user = User.objects.create_user("starter", password="pw")
    user.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_run", "view_thread", "start_run"])
    )
    client.force_login(User.objects.get(pk=user.pk))
    run = busy_run()
    page = thread_page(client, run)
    assert modes(page) == ["queue", "steer"]
    url = reverse("runs:thread-send", args=[run.thread_id])
    form = {"agent": "greeter", "message": "x", "mode": "interrupt_then_queue"}
    assert client.post(url, form).status_code == 403
    assert Run.objects.get(pk=run.pk).status == "created"


def test_edit_and_retract_from_the_page(operator_client):
    run = busy_run()
    input_ = queue(run, "draft")
    edit = reverse("runs:input-edit", args=[input_.pk])
    response = operator_client.post(edit, {"message": "final", "priority": "3"})
    assert response.status_code == 302
    input_.refresh_from_db()
    assert (input_.text, input_.priority) == ("final", 3)
    retract = reverse("runs:input-retract", args=[input_.pk])
    response = operator_client.post(retract)
    page = operator_client.get(response["Location"]).content.decode()
    assert "Input #2 retracted" in page and "No pending input." in page
    input_.refresh_from_db()
    assert input_.status == "retracted"
    response = operator_client.post(retract)  # again: it is not pending any more
    assert response.status_code == 409
    assert "retracted already" in unescape(response.content.decode())
    response = operator_client.post(edit, {"message": "too late"})
    assert "only pending input can change" in unescape(response.content.decode())
    drive(run)
    assert Run.objects.filter(thread=run.thread).count() == 1  # never delivered


def test_retract_from_the_run_page_goes_back_there(operator_client):
    run = busy_run()
    steer = queue(run, "steer it", mode="steer")
    page = operator_client.get(reverse("runs:run-detail", args=[run.pk])).content.decode()
    assert 'id="steer-inputs"' in page and "steer it" in page
    response = operator_client.post(reverse("runs:input-retract", args=[steer.pk]), {"back": "run"})
    assert response["Location"].endswith(f"/runs/{run.pk}/")
    page = operator_client.get(response["Location"]).content.decode()
    assert 'id="steer-inputs"' not in page
    assert Run.objects.get(pk=run.pk).pending_inputs == 0


def test_interrupt_thread_cancels_the_run_and_the_pending_input(operator_client):
    run = busy_run()
    inputs = [queue(run, f"input {n}") for n in range(2)]
    response = operator_client.post(reverse("runs:thread-interrupt", args=[run.thread_id]))
    assert response.status_code == 302
    page = operator_client.get(response["Location"]).content.decode()
    assert f"Interrupted: run {str(run.pk)[-8:]} cancelled, 2 pending inputs cancelled." in page
    assert "No pending input." in page and "Interrupt thread" not in page
    assert {PendingInput.objects.get(pk=i.pk).status for i in inputs} == {"cancelled"}
    assert Run.objects.get(pk=run.pk).status_reason == "cancelled"


def test_delivered_inputs_are_recalled_and_text_is_escaped_everywhere(operator_client):
    run = busy_run()
    queue(run, f"queued {XSS}")
    steer = queue(run, f"steer {XSS}", mode="steer")
    pages = [
        reverse("runs:thread-detail", args=[run.thread_id]),
        reverse("runs:thread-inputs", args=[run.thread_id]),
        reverse("runs:run-detail", args=[run.pk]),
        reverse("runs:run-header", args=[run.pk]),
    ]
    for url in pages:
        html = operator_client.get(url).content.decode()
        assert XSS not in html, url
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html, url
    drive(run)  # ends: the steer it did not take and the queued input start the next runs
    html = operator_client.get(pages[1]).content.decode()
    assert "<h3>Delivered</h3>" in html and XSS not in html
    assert re.search(
        r'#2 <span title="queue">Queued</span> “queued &lt;script&gt;alert\(1\)&lt;/script&gt;” → run',
        html,
    )
    delivered = PendingInput.objects.get(pk=steer.pk)
    assert delivered.status == "pending"  # queued behind #2, now that its run ended
    nxt = Run.objects.exclude(pk=run.pk).get(thread=run.thread)
    timeline = operator_client.get(reverse("runs:run-timeline", args=[nxt.pk])).content.decode()
    assert "Queued input as a new run: queued &lt;script&gt;" in timeline and XSS not in timeline


# --- the run page ------------------------------------------------------------------------------


def test_the_run_page_shows_priority_with_a_form_while_queued(operator_client):
    run = busy_run()
    url = reverse("runs:run-detail", args=[run.pk])
    page = operator_client.get(url).content.decode()
    assert 'priority <b id="run-priority">128</b>' in page and "foreground" in page
    assert reverse("runs:run-priority", args=[run.pk]) in page
    viewer = Client()
    viewer.force_login(user_with_role("viewer", "vic"))
    assert reverse("runs:run-priority", args=[run.pk]) not in viewer.get(url).content.decode()
    response = operator_client.post(reverse("runs:run-priority", args=[run.pk]), {"priority": "4"})
    assert response["Location"].endswith(f"/runs/{run.pk}/")
    page = operator_client.get(url).content.decode()
    assert "Priority set to 4." in page and 'priority <b id="run-priority">4</b>' in page
    drive(run)
    page = operator_client.get(url).content.decode()
    assert reverse("runs:run-priority", args=[run.pk]) not in page  # done: no form
    response = operator_client.post(reverse("runs:run-priority", args=[run.pk]), {"priority": "1"})
    assert response.status_code == 409
    assert "only a queued run" in unescape(response.content.decode())


def test_a_scheduled_run_links_its_schedule(operator_client):
    run = busy_run()
    schedule = Schedule.objects.create(
        name="nightly", agent=run.agent, message="report", interval_seconds=3600, kind="interval"
    )
    Run.objects.filter(pk=run.pk).update(run_mode="scheduled", schedule=schedule)
    page = operator_client.get(reverse("runs:run-detail", args=[run.pk])).content.decode()
    assert '<span class="badge">scheduled</span>' in page
    assert f'href="/admin/runs/schedule/{schedule.pk}/change/"' in page
    page = thread_page(operator_client, run)
    assert '<span class="badge">scheduled</span>' in page


# --- the live panels ---------------------------------------------------------------------------


def test_the_live_panels_render_and_need_a_login_and_a_thread(operator_client):
    run = busy_run()
    queue(run, "waiting here")
    names = ["runs:thread-inputs", "runs:thread-runs", "runs:thread-transcript"]
    for name in names:
        url = reverse(name, args=[run.thread_id])
        response = operator_client.get(url)
        assert response.status_code == 200, name
        assert Client().get(url).status_code == 302, name
        missing = reverse(name, args=["00000000-0000-0000-0000-000000000000"])
        assert operator_client.get(missing).status_code == 404, name
    inputs = operator_client.get(reverse("runs:thread-inputs", args=[run.thread_id]))
    assert b"waiting here" in inputs.content
    runs = operator_client.get(reverse("runs:thread-runs", args=[run.thread_id]))
    assert f"/runs/{run.pk}/".encode() in runs.content
    transcript = operator_client.get(
        reverse("runs:thread-transcript", args=[run.thread_id]) + "?from_seq=1"
    )
    assert b'id="msg-1"' in transcript.content and b"waiting here" not in transcript.content
    no_role = Client()
    no_role.force_login(user_with_role("viewer", "vic"))
    assert no_role.get(reverse("runs:thread-inputs", args=[run.thread_id])).status_code == 200
