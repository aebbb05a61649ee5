"""Run control on the thread page in a real browser against a real server (conftest.py):
steering a running run (the message reaches the run at its next step, the pending list
empties without a reload) and queueing input behind a busy run, then retracting it (it
is never delivered)."""

from __future__ import annotations

from playwright.sync_api import expect

from runs.models import PendingInput, Run
from tests.browser.helpers import login, mark_page, start_run, still_same_page, wait_db, wait_status
from tests.factories import call, scripted_agent, user_with_role

STEER = "steer: use the <b>blue</b> one"


def slow_agent() -> None:
    """Four turns of about a second and a half each: three that sleep, one that answers."""
    turn = {"delay": 0.8, "tool_calls": [call("sleep", {"seconds": 0.6})]}
    scripted_agent(
        [
            {"text": "one, slowly", **turn},
            {"text": "two, slowly", **turn},
            {"text": "three, slowly", **turn},
            {"text": "finished", "delay": 0.5},
        ],
        tools=["sleep"],
        slug="slowpoke",
    )


def open_thread_of_running_run(new_page):
    slow_agent()
    user_with_role("operator", "opa")
    page = new_page()
    login(page, "opa")
    run_id = start_run(page, "slowpoke", "take your time")
    run = wait_status(run_id, "running")
    page.goto(f"/threads/{run.thread_id}/")
    expect(page.locator(".conn")).to_have_text("live")
    return page, run


def send(page, text: str, mode: str | None = None) -> None:
    composer = page.locator("#composer")
    composer.get_by_label("Message", exact=True).fill(text)
    if mode is not None:
        composer.locator("select[name=mode]").select_option(mode)
    composer.get_by_role("button", name="Send").click()


def test_steer_reaches_the_running_run_at_its_next_step(new_page):
    page, run = open_thread_of_running_run(new_page)
    modes = page.locator("#composer select[name=mode] option")
    expect(modes).to_have_text(["Queue", "Steer", "Interrupt, then queue"])
    send(page, STEER, "steer")

    expect(page.locator(".flash")).to_contain_text("goes into the open run at its next step")
    mark_page(page)  # from here on the page updates itself
    expect(page.locator(".conn")).to_have_text("live")
    wait_db(
        lambda: PendingInput.objects.filter(
            thread_id=run.thread_id, status="delivered", mode="steer"
        ).exists(),
        "the steer input delivered",
    )
    steer = PendingInput.objects.get(thread_id=run.thread_id, mode="steer")
    assert (steer.boundary, steer.delivered_run_id) == ("next_step", run.pk)
    # the pending section empties, the transcript and the history show it: no reload
    expect(page.locator("#thread-inputs .pending-input")).to_have_count(0)
    expect(page.locator("#no-pending")).to_be_visible()
    expect(page.locator("#thread-transcript")).to_contain_text(STEER)
    delivered = page.locator(f"#thread-inputs .delivered-inputs #delivered-{steer.pk}")
    expect(delivered.locator("span[title=steer]")).to_have_text("Steer")
    expect(delivered.locator("span[title=next_step]")).to_have_text("at its next step")
    # the text stays text: no <b> from the message (the tool calls' names are <b>)
    assert page.locator("#thread-transcript b", has_text="blue").count() == 0
    done = wait_status(str(run.pk), "done")
    assert done.status_reason == "natural"
    assert Run.objects.filter(thread_id=run.thread_id).count() == 1  # no run of its own
    expect(page.locator("#thread-runs .badge[title='done · natural']")).to_have_text("Finished")
    assert still_same_page(page)
    assert not page.dialogs


def test_queued_input_is_listed_then_retracted_and_never_delivered(new_page):
    page, run = open_thread_of_running_run(new_page)
    send(page, "later: write it all down")  # mode queue, the default

    pending = page.locator("#thread-inputs .pending-input")
    expect(pending).to_have_count(1)
    expect(pending).to_contain_text("later: write it all down")
    expect(pending.locator("b[title=queue]")).to_have_text("Queued")
    expect(pending).to_contain_text("by opa")
    queued = PendingInput.objects.get(thread_id=run.thread_id, status="pending")

    retract = pending.get_by_role("button", name="Retract")
    retract.click()  # the confirmation is dismissed: nothing happens
    assert page.dialogs == [f"confirm: Retract input #{queued.seq}? It will never be delivered."]
    expect(pending).to_have_count(1)
    assert PendingInput.objects.get(pk=queued.pk).status == "pending"
    page.evaluate("window.confirm = () => true")  # the operator confirms this time
    retract.click()

    expect(page.locator(".flash")).to_contain_text(f"Input #{queued.seq} retracted")
    expect(page.locator("#thread-inputs .pending-input")).to_have_count(0)
    assert PendingInput.objects.get(pk=queued.pk).status == "retracted"
    wait_status(str(run.pk), "done")
    page.wait_for_timeout(1000)  # the sweep would start a queued input by now
    queued.refresh_from_db()
    assert (queued.status, queued.delivered_run_id) == ("retracted", None)
    assert Run.objects.filter(thread_id=run.thread_id).count() == 1
    expect(page.locator("#thread-runs .badge[title='done · natural']")).to_have_text("Finished")
    expect(page.locator("#thread-inputs .pending-input")).to_have_count(0)
