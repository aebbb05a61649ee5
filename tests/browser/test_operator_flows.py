"""Operator flows in a real browser against a real server (see conftest.py): starting a
run, watching it stream, deciding tickets alone and in pairs, reconnecting, roles,
escaping, the inbox and edits."""

from __future__ import annotations

import json
import re

from django.core.management import call_command
from playwright.sync_api import expect

from agents.models import Note
from common.models import AuditEntry
from runs.models import Decision, Run, Ticket
from tests.browser.helpers import (
    NOTE_AND_EMAIL_APPROVAL,
    csrf_token,
    login,
    mark_page,
    post,
    route_sockets,
    run_id_of,
    start_run,
    still_same_page,
    timeline_seqs,
    wait_db,
    wait_new_socket,
    wait_status,
)
from tests.factories import call, scripted_agent, user_with_role

IMG = "<img src=x onerror=alert(1)>"
SCRIPT = "<script>alert(2)</script>"


def pending_ticket(run_id: str) -> Ticket:
    wait_db(
        lambda: Ticket.objects.filter(run_id=run_id, status="pending").exists(),
        f"a pending ticket on run {run_id}",
    )
    return Ticket.objects.get(run_id=run_id, status="pending")


def decide_url(response) -> bool:
    return response.request.method == "POST" and response.url.endswith("/decide")


def no_injected_markup(page) -> None:
    """Nothing from the payloads became markup: no <img src=x>, no inline script."""
    assert page.locator("img[src='x']").count() == 0
    inline = page.evaluate(
        "Array.from(document.scripts).filter(s => s.textContent.includes('alert(')).length"
    )
    assert inline == 0


# --- 1 -------------------------------------------------------------------------------------


def test_operator_starts_a_thread_watches_it_stream_and_approves_the_note(new_page):
    call_command("seed_demo", verbosity=0)
    user_with_role("operator", "opa")
    page = new_page()
    login(page, "opa")

    page.get_by_role("link", name="Threads").click()
    expect(page.get_by_role("heading", name="Threads")).to_be_visible()
    form = page.locator("form", has=page.get_by_role("heading", name="New thread"))
    form.get_by_label("Agent").select_option("approver")
    form.get_by_label("Message").fill("please write a note about lunch")
    form.get_by_role("button", name="Start").click()

    expect(page).to_have_url(re.compile(r"/runs/[0-9a-f-]{36}/$"))
    run_id = run_id_of(page)
    mark_page(page)
    expect(page.locator("#conn")).to_have_text("live")
    ticket = page.locator("#run-tickets .ticket")
    expect(ticket).to_contain_text("write_note")
    expect(ticket).to_contain_text('"title": "lunch"')
    rows_while_waiting = page.locator("#run-timeline .ev").count()
    assert rows_while_waiting > 0

    ticket.get_by_role("button", name="Approve").click()
    expect(page.locator("#run-status .badge")).to_have_attribute("title", "done · natural")
    expect(page.locator("#run-transcript")).to_contain_text("Done.")
    expect(page.locator("#run-tickets")).to_contain_text("No open tickets.")

    run = Run.objects.get(pk=run_id)
    # the rows after the approval streamed in: same document, one row per event
    expect(page.locator("#run-timeline .ev")).to_have_count(run.last_event_seq)
    assert run.last_event_seq > rows_while_waiting
    assert still_same_page(page)
    assert (run.status, run.status_reason) == ("done", "natural")
    assert list(Note.objects.filter(run_id=run_id).values_list("title", flat=True)) == ["lunch"]
    assert not page.dialogs


# --- 2 -------------------------------------------------------------------------------------


def test_two_operators_first_decision_wins_and_the_late_one_is_told_who(new_page):
    call_command("seed_demo", verbosity=0)
    user_with_role("operator", "opa")
    user_with_role("operator", "opb")
    a = new_page()
    login(a, "opa")
    run_id = start_run(a, "approver", "please write a note about lunch")
    pending_ticket(run_id)

    b = new_page()
    login(b, "opb")
    b.goto(f"/runs/{run_id}/")
    mark_page(b)
    expect(b.locator("#conn")).to_have_text("live")
    expect(b.get_by_role("button", name="Approve")).to_be_visible()
    # B's second tab never gets a live socket: it keeps showing what it loaded
    stale = b.context.new_page()
    stale.route_web_socket(re.compile(r"/ws/"), lambda ws: ws.close())
    stale.goto(f"/runs/{run_id}/")
    expect(stale.get_by_role("button", name="Approve")).to_be_visible()

    a.goto(f"/runs/{run_id}/")
    with a.expect_response(decide_url) as answer:
        a.get_by_role("button", name="Approve").click()
    assert answer.value.status == 200
    assert "Approved write_note." in answer.value.text()

    # B's live page drops the ticket by itself
    expect(b.locator("#run-tickets .ticket")).to_have_count(0)
    expect(b.locator("#run-tickets")).to_contain_text("No open tickets.")
    assert still_same_page(b)

    with stale.expect_response(decide_url) as answer:
        stale.get_by_role("button", name="Approve").click()
    assert answer.value.status == 409
    flash = stale.locator("#run-outcomes .flash.error")
    expect(flash).to_contain_text(re.compile(r"already decided by opa at \d{4}-\d\d-\d\dT"))

    wait_status(run_id, "done")
    expect(b.locator("#run-status .badge")).to_have_attribute("title", "done · natural")
    assert Note.objects.filter(run_id=run_id).count() == 1
    decisions = Decision.objects.filter(ticket__run_id=run_id)
    assert [(d.action, d.actor_label) for d in decisions] == [("approve", "opa")]


# --- 3 -------------------------------------------------------------------------------------


def test_a_dropped_socket_reconnects_and_the_timeline_has_every_event_once(new_page):
    words = " ".join(f"word{i}" for i in range(12))
    scripted_agent(
        [
            {"text": f"one {words}", "delay": 1.0, "tool_calls": [call("sleep", {"seconds": 0.6})]},
            {"text": f"two {words}", "delay": 1.0, "tool_calls": [call("sleep", {"seconds": 0.6})]},
            {
                "text": f"three {words}",
                "delay": 1.0,
                "tool_calls": [call("sleep", {"seconds": 0.6})],
            },
            {"text": f"finished {words}", "delay": 1.0},
        ],
        tools=["sleep"],
        slug="slowpoke",
    )
    user_with_role("operator", "opa")
    page = new_page()
    login(page, "opa")
    run_id = start_run(page, "slowpoke", "take your time")
    sockets = route_sockets(page, f"/ws/runs/{run_id}/")
    page.goto(f"/runs/{run_id}/")
    mark_page(page)
    conn = page.locator("#conn")

    for at_least in (3, 10):  # drop it twice, at different points of the run
        expect(conn).to_have_text("live")
        wait_db(
            lambda n=at_least: Run.objects.get(pk=run_id).last_event_seq >= n,
            f"{at_least} events",
        )
        assert Run.objects.get(pk=run_id).status != "done", "the run ended before the drop"
        opened = len(sockets)
        sockets[-1].close()  # dropped, as by the network: the page reconnects
        resumed = wait_new_socket(page, sockets, opened)
        assert "?after_seq=" in resumed.url, resumed.url  # resumes after the page's last seq
        expect(conn).to_have_text("live")  # the new socket is open

    expect(conn).to_have_text("live")
    run = wait_status(run_id, "done")
    assert run.status_reason == "natural"
    expect(page.locator("#run-timeline .ev").last).to_have_attribute(
        "data-seq", str(run.last_event_seq)
    )
    assert timeline_seqs(page) == list(range(1, run.last_event_seq + 1))
    expect(page.locator("#run-status .badge")).to_have_attribute("title", "done · natural")
    assert still_same_page(page)


# --- 4 -------------------------------------------------------------------------------------

WS_ACTION = """([path, ticket]) => new Promise((resolve) => {
  const socket = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + path);
  const timer = setTimeout(() => resolve(-1), 8000);
  socket.onmessage = (message) => {
    if (JSON.parse(message.data).type === "ready") {
      socket.send(JSON.stringify({action: "approve", ticket: ticket}));
    }
  };
  socket.onclose = (event) => { clearTimeout(timer); resolve(event.code); };
})"""


def test_a_viewer_sees_no_controls_and_cannot_decide_by_post_or_socket(new_page):
    call_command("seed_demo", verbosity=0)
    user_with_role("operator", "opa")
    user_with_role("viewer", "vic")
    operator = new_page()
    login(operator, "opa")
    run_id = start_run(operator, "approver", "please write a note about lunch")
    ticket = pending_ticket(run_id)

    page = new_page()
    login(page, "vic")
    page.goto(f"/runs/{run_id}/")
    expect(page.locator("#run-tickets .ticket")).to_contain_text("write_note")
    expect(page.locator("#conn")).to_have_text("live")
    for name in ("Approve", "Reject", "Edit", "Respond", "Cancel run", "Retry"):
        expect(page.get_by_role("button", name=name)).to_have_count(0)
    expect(page.locator("#run-tickets form")).to_have_count(0)
    page.locator("#run-header a[href^='/threads/']").click()  # the run's thread
    expect(page.get_by_role("heading", name="Messages")).to_be_visible()
    expect(page.locator("form.composer, textarea")).to_have_count(0)
    page.goto("/threads/")
    expect(page.get_by_role("heading", name="New thread")).to_have_count(0)
    expect(page.locator("textarea")).to_have_count(0)
    page.goto("/inbox/")
    expect(page.locator("#inbox-list tr[data-ticket-id]")).to_have_count(1)
    expect(page.locator("#inbox-list input[type=checkbox]")).to_have_count(0)
    expect(page.get_by_role("button", name=re.compile("selected"))).to_have_count(0)

    forged = post(page, f"/tickets/{ticket.pk}/decide", {"action": "approve"})
    assert forged.status == 403
    assert "You may not decide tickets" in forged.text()
    forged_bulk = post(
        page, "/inbox/bulk", {"action": "approve", "ticket": str(ticket.pk), "confirm": "1"}
    )
    assert forged_bulk.status == 403
    assert csrf_token(page)  # the forgeries carried a valid token: refused for the role

    code = page.evaluate(WS_ACTION, [f"/ws/runs/{run_id}/?after_seq=0", str(ticket.pk)])
    assert code == 4403

    ticket.refresh_from_db()
    assert ticket.status == "pending"
    assert not Decision.objects.filter(ticket=ticket).exists()
    assert Run.objects.get(pk=run_id).status == "waiting"
    assert not Note.objects.exists()


# --- 5 -------------------------------------------------------------------------------------


def test_markup_in_arguments_and_replies_is_shown_as_text_everywhere(new_page):
    scripted_agent(
        [
            {
                "text": f"Reply {IMG} and {SCRIPT}",
                "tool_calls": [call("write_note", {"title": IMG, "body": SCRIPT})],
            },
            {"text": f"Done. {IMG} {SCRIPT}"},
        ],
        tools=["write_note"],
        permission=NOTE_AND_EMAIL_APPROVAL,
        slug="mischief",
    )
    user_with_role("operator", "opa")
    page = new_page()
    login(page, "opa")
    run_id = start_run(page, "mischief", f"{IMG} {SCRIPT} note this")
    pending_ticket(run_id)

    page.goto(f"/runs/{run_id}/")
    expect(page.locator("#conn")).to_have_text("live")
    expect(page.locator("#run-tickets .ticket pre.args")).to_contain_text(f'"title": "{IMG}"')
    expect(page.locator("#run-tickets .ticket pre.args")).to_contain_text(f'"body": "{SCRIPT}"')
    expect(page.locator("#run-transcript")).to_contain_text(f"Reply {IMG} and {SCRIPT}")
    expect(page.locator("#run-transcript")).to_contain_text(f"{IMG} {SCRIPT} note this")
    no_injected_markup(page)

    page.locator("#run-header a[href^='/threads/']").click()
    expect(page.locator(".transcript")).to_contain_text(f"Reply {IMG} and {SCRIPT}")
    expect(page.locator("h1")).to_contain_text(IMG)
    no_injected_markup(page)

    page.goto("/runs/")
    expect(page.locator(f"#run-row-{run_id}")).to_contain_text(IMG)
    no_injected_markup(page)

    page.goto("/threads/")
    expect(page.locator("table")).to_contain_text(IMG)
    no_injected_markup(page)

    page.goto("/inbox/")
    row = page.locator("#inbox-list tr[data-ticket-id]")
    expect(row).to_contain_text(json.dumps(IMG))
    row.locator("summary").click()
    expect(row.locator("pre.args")).to_contain_text(f'"body": "{SCRIPT}"')
    no_injected_markup(page)

    # approve it: the reply streamed live and the final answer are text too
    page.goto(f"/runs/{run_id}/")
    expect(page.locator("#conn")).to_have_text("live")
    page.get_by_role("button", name="Approve").click()
    expect(page.locator("#run-status .badge")).to_have_attribute("title", "done · natural")
    expect(page.locator("#run-header")).to_contain_text(f"Answer: Done. {IMG} {SCRIPT}")
    expect(page.locator("#run-transcript")).to_contain_text(f"Done. {IMG} {SCRIPT}")
    no_injected_markup(page)
    page.goto("/")
    no_injected_markup(page)

    assert page.dialogs == []
    assert Note.objects.get(run_id=run_id).title == IMG


# --- 6 -------------------------------------------------------------------------------------


def test_inbox_bulk_approves_three_tickets_after_confirmation(new_page):
    call_command("seed_demo", verbosity=0)
    user_with_role("operator", "opa")
    page = new_page()
    login(page, "opa")
    topics = ["lunch", "dinner", "breakfast"]
    run_ids = [start_run(page, "approver", f"please write a note about {t}") for t in topics]
    for run_id in run_ids:
        pending_ticket(run_id)
    wait_db(
        lambda: Run.objects.filter(pk__in=run_ids, status="waiting").count() == 3,
        "three waiting runs",
    )

    page.get_by_role("link", name="Approvals").click()
    expect(page.locator("h1 .conn")).to_have_text("live")
    rows = page.locator("#inbox-list tr[data-ticket-id]")
    expect(rows).to_have_count(3)
    for index in range(3):
        rows.nth(index).get_by_role("checkbox").check()
    page.get_by_role("button", name="Approve selected…").click()

    confirm = page.locator("#inbox-confirm")
    expect(confirm.get_by_role("heading")).to_have_text("Approve 3 tickets?")
    listed = confirm.locator("tbody tr")
    expect(listed).to_have_count(3)
    for topic in topics:
        expect(confirm).to_contain_text(f'"title": "{topic}"')
    confirm.get_by_role("button", name="Confirm approve 3 tickets").click()

    expect(page.locator("#inbox-confirm")).to_contain_text("3 approved.")
    expect(page.locator("#inbox-list")).to_contain_text("Nothing is waiting for a decision")
    wait_db(
        lambda: (
            Run.objects.filter(pk__in=run_ids, status="done", status_reason="natural").count() == 3
        ),
        "the three runs to finish",
    )
    assert sorted(Note.objects.values_list("title", flat=True)) == sorted(topics)
    assert Decision.objects.filter(action="approve", actor_label="opa").count() == 3


# --- 7 -------------------------------------------------------------------------------------


def test_an_edited_argument_runs_and_is_shown_before_and_after(new_page):
    call_command("seed_demo", verbosity=0)
    user_with_role("operator", "opa")
    page = new_page()
    login(page, "opa")
    run_id = start_run(page, "approver", "please write a note about lunch")
    pending_ticket(run_id)
    page.goto(f"/runs/{run_id}/")
    expect(page.locator("#conn")).to_have_text("live")

    ticket = page.locator("#run-tickets .ticket")
    ticket.locator("summary", has_text="Edit").click()
    form = ticket.locator("form.edit-form")
    title = form.locator("[name=arg_title]")
    expect(title).to_have_value("lunch")
    title.fill("Team lunch on Friday")
    diff = form.locator("table.diff")
    expect(diff.locator("td.before")).to_have_text('"lunch"')
    expect(diff.locator("td.after")).to_have_text('"Team lunch on Friday"')
    form.get_by_label("Comment").fill("more precise")
    with page.expect_response(decide_url) as answer:
        form.get_by_role("button", name="Run with these arguments").click()
    assert answer.value.status == 200
    assert "Edited and approved write_note." in answer.value.text()

    expect(page.locator("#run-status .badge")).to_have_attribute("title", "done · natural")
    assert Note.objects.get(run_id=run_id).title == "Team lunch on Friday"

    # plain words in the row; the event type on hover, the raw decision in its detail
    event = page.locator("#run-timeline .ev", has=page.locator("b[title=ticket_decided]"))
    expect(event).to_have_count(1)
    expect(event.locator("summary")).to_have_text(
        "Ticket decided write_note: Edited and approved by opa"
    )
    event.locator("summary").click()
    payload = json.loads(event.locator("pre").inner_text())
    decision = payload["decision"]
    assert (decision["action"], decision["actor"]) == ("edit", "opa")
    assert decision["arguments_before"]["title"] == "lunch"
    assert decision["arguments_after"]["title"] == "Team lunch on Friday"
    assert decision["comment"] == "more precise"

    page.get_by_role("link", name="Audit").click()
    row = page.locator("tr", has=page.locator("code", has_text="ticket.edit"))
    expect(row).to_have_count(1)
    before, after = row.locator("td").nth(4).locator("code").all()
    expect(before).to_contain_text('"title": "lunch"')
    expect(after).to_contain_text('"title": "Team lunch on Friday"')
    expect(after).not_to_contain_text('"title": "lunch"')
    expect(row).to_contain_text("opa")
    expect(row).to_contain_text("more precise")
    assert AuditEntry.objects.filter(action="ticket.edit").count() == 1
