"""Plain words on every page (issue 29, item 1): every page and partial of awaken_site/page_urls.py,
rendered in every state the fixtures reach (runs queued, running, waiting on an approval,
a question and a child run, finished, finished after a rejection, cancelled, failed,
stopped; tickets open and decided; threads with pending and delivered input), shows no
raw status, reason, kind or action value outside a tooltip (a title attribute) or a
payload (<pre>, <code>). The technical value stays on hover."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser

import pytest
from django.urls import URLPattern, reverse

from awaken_site import page_urls as urls
from common.audit import Actor
from runs.models import Decision, PendingInput, Run, Ticket
from runs.runtime.status import RunStatus, WaitingReason
from runs.services.runs import run_cancel
from runs.services.submission_flow import input_submit, run_start
from runs.services.tickets import decision_submit
from runs.wording import DONE_REASONS, TABLES, run_status_text, transcript_text
from tests.factories import call, scripted_agent, team, waiting_run
from tests.runs.helpers import drive
from tests.runs.test_pages_clarity import asking_human, delegating_runs

pytestmark = pytest.mark.django_db

OPERATOR = Actor(label="olga", source="ui")

# Values that are not words: shown anywhere outside a tooltip or a payload, a page fails.
TECHNICAL = sorted(
    {
        *(value for value in TABLES["event"]),
        *(value for value in TABLES["input_mode"] if "_" in value),
        *TABLES["boundary"],
        *TABLES["notification"],
        *(reason.value for reason in WaitingReason),
        "awaiting_tasks",
        "input_required",
        "user_input_required",
        "auth_required",
        "behavior_requested",
        "natural_end",
        "tool:PermissionConfirm",
        "use_decision_as_tool_result",
        "replay_tool_call",
        "stopped:",
        "blocked:",
        "perm_call_",
        "suspend_call_",
        "delegate_run:",
        "suspended: awaiting decision",
    }
    - {"error", "budget"},  # words: the "error" event (a failed run's badge is checked
    # below), the "budget" waiting reason (its pages say "Waiting: budget reached")
    key=len,
    reverse=True,
)
# Values that are words, raw when a piece of text (split at "·") is exactly one of them:
# "done · natural", a ticket's "decided", a message's "assistant".
BARE = {
    *(status.value for status in RunStatus),
    *DONE_REASONS,
    "suspended",
    *Ticket.Status.values,
    *Decision.Action.values,
    *PendingInput.Mode.values,
    *PendingInput.Status.values,
    *TABLES["role"],
    *TABLES["task"],
    *TABLES["tool_call"],
} - {"system", "new"}  # the system actor's name in the audit log, a new rule's badge
SKIPPED_ELEMENTS = {"pre", "code", "textarea", "script", "style", "th", "title"}


class VisibleText(HTMLParser):
    """The text nodes a person reads: not attributes (a title is a tooltip), not payloads
    (<pre>, <code>, an edited value in a <textarea>), not column headings."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.skipping: list[str] = []
        self.texts: list[str] = []
        self.labels: set[int] = set()  # the texts right before a <time>: "created", "waiting"

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "time" and self.texts:
            self.labels.add(len(self.texts) - 1)
        if tag in SKIPPED_ELEMENTS:
            self.skipping.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if self.skipping and self.skipping[-1] == tag:
            self.skipping.pop()

    def handle_data(self, data: str) -> None:
        if not self.skipping and data.strip():
            self.texts.append(data)


def raw_values_shown(page: str) -> list[str]:
    """What of `page`'s visible text is a raw value, each with the text it is in."""
    parser = VisibleText()
    parser.feed(page)
    found = []
    for index, text in enumerate(parser.texts):
        for value in TECHNICAL:
            if re.search(r"(?<![\w])" + re.escape(value) + r"(?![\w])", text) or (
                not value[-1].isalnum() and value in text
            ):
                found.append(f"{value!r} in {text.strip()[:120]!r}")
                break
        else:
            pieces = re.split(r"[·\n]", text)
            if index in parser.labels:  # "· created <time>": the last piece labels a time
                pieces = pieces[:-1]
            for piece in pieces:
                piece = re.sub(r"^#\d+\s+", "", piece.strip())
                if piece in BARE:
                    found.append(f"{piece!r} in {text.strip()[:120]!r}")
    return found


def summary(shown: dict[str, list[str]]) -> str:
    """Each raw value found, once, with the first page it was on."""
    first: dict[str, str] = {}
    for url, found in shown.items():
        for item in found:
            first.setdefault(item, url)
    return "raw values shown:\n" + "\n".join(f"{item}  ({url})" for item, url in first.items())


def test_the_check_finds_what_the_issue_saw():
    assert raw_values_shown('<span class="badge">waiting · suspended</span>')
    assert raw_values_shown("<span>done · natural</span>")
    assert raw_values_shown("<span>tool:PermissionConfirm · perm_call_1</span>")
    assert raw_values_shown("<div>Tool 'write_note' suspended: awaiting decision</div>")
    assert raw_values_shown("<td>decided</td>")
    assert raw_values_shown('<div class="who">#3 assistant</div>')
    assert not raw_values_shown('<span title="done · natural">Finished</span>')
    assert not raw_values_shown('<pre>{"status": "done"}</pre><th>tool</th>')
    assert not raw_values_shown("<p>The agent is all done: it wrote the note.</p>")


def test_the_wording_table():
    assert run_status_text("waiting", "suspended") == "Waiting for a decision"
    assert run_status_text("done", "natural") == "Finished"
    assert run_status_text("done", "natural", rejected=True) == "Finished — action rejected"
    assert run_status_text("done", "stopped:max_rounds") == "Stopped — step limit reached"
    assert run_status_text("done", "cancelled") == "Cancelled"
    assert run_status_text("created") == "Queued"
    assert transcript_text("Tool 'write_note' suspended: awaiting decision") == (
        "write_note is waiting for a decision before it runs."
    )
    assert transcript_text("a note") == "a note"


# --- the states the fixtures reach ---------------------------------------------------------------


@dataclass
class World:
    runs: dict[str, Run] = field(default_factory=dict)
    tickets: dict[str, Ticket] = field(default_factory=dict)

    def run(self, name: str) -> Run:
        return self.runs[name]


def _ticket(run: Run) -> Ticket:
    return Ticket.objects.filter(run=run).order_by("created_at").first()


def build_world() -> World:
    world = World()
    team("default", reason_required=True)
    approval = waiting_run("lunch")
    world.runs["approval"] = approval
    world.tickets["pending"] = _ticket(approval)
    world.runs["question"] = asking_human("Which room?")
    parent, child = delegating_runs()
    world.runs["parent"], world.runs["child"] = parent, child
    rejected = waiting_run("dinner")
    decision_submit(ticket=_ticket(rejected), action="reject", comment="no", actor=OPERATOR)
    world.runs["rejected"] = drive(Run.objects.get(pk=rejected.pk))
    world.tickets["decided"] = _ticket(rejected)
    approved = waiting_run("breakfast")
    decision_submit(ticket=_ticket(approved), action="approve", actor=OPERATOR)
    world.runs["approved"] = drive(Run.objects.get(pk=approved.pk))
    cancelled = waiting_run("tea")
    world.runs["cancelled"] = run_cancel(run=cancelled, actor=OPERATOR, reason="not needed")
    agent = scripted_agent([{"text": "ok"}], slug="greeter")
    queued = input_submit(agent=agent, messages="go").run
    assert queued is not None
    world.runs["queued"] = queued
    input_submit(agent=None, messages="after that", thread=queued.thread)
    input_submit(agent=None, messages="and steer", thread=queued.thread, mode="steer")
    for name, reason in (("failed", "error"), ("stopped", "stopped:max_rounds")):
        run = drive(run_start(agent=agent, messages=f"the {name} one"))
        Run.objects.filter(pk=run.pk).update(
            status_reason=reason, error_payload={"message": "cannot reach provider"}
        )
        world.runs[name] = Run.objects.get(pk=run.pk)
    running = drive(run_start(agent=agent, messages="the busy one"))
    Run.objects.filter(pk=running.pk).update(status="running", status_reason="")
    world.runs["running"] = running
    delivered = drive(run_start(agent=agent, messages="first"))
    input_submit(agent=None, messages="second", thread=delivered.thread)
    world.runs["delivered"] = delivered
    notes = scripted_agent(
        [{"text": "", "tool_calls": [call("write_note", {"title": "x", "body": "y"})]}],
        permission={"default_behavior": "ask"},
        slug="notes",
    )
    world.runs["notes"] = drive(run_start(agent=notes, messages="note it"))
    return world


# --- every page ---------------------------------------------------------------------------------

RUN_PAGES = (
    "run-detail",
    "run-row",
    "run-header",
    "run-tickets",
    "run-transcript",
    "run-timeline",
    "run-trace",
)
THREAD_PAGES = (
    "thread-detail",
    "thread-messages",
    "thread-inputs",
    "thread-runs",
    "thread-transcript",
)
# not pages a person reads: actions (POST), data exports, forms of one field
NOT_PAGES = {
    "run-list-export": "a CSV export",
    "run-export": "a JSON export",
    "audit-export": "a CSV export",
    "run-cancel": "POST",
    "run-retry": "POST",
    "run-fork": "POST",
    "run-priority": "POST",
    "ticket-decide": "POST",
    "ticket-edit-preview": "POST",
    "ticket-claim": "POST",
    "ticket-release": "POST",
    "ticket-assign": "POST",
    "thread-send": "POST",
    "thread-new": "POST",
    "thread-interrupt": "POST",
    "input-edit": "POST",
    "input-retract": "POST",
    "inbox-bulk": "POST",
    "inbox-decide": "POST",
    "inbox-policy": "POST",
    "saved-view-save": "POST",
    "saved-view-delete": "POST",
    "replay-preview": "POST",
    "replay-cancel": "POST",
    "token-revoke": "POST",
    "notification-unsubscribe": "POST",
    "team-settings": "POST",
    "notification-route-delete": "POST",
    "notification-route-edit": "the form of one route: its channel, events and filters",
    "notification-channel-delete": "POST",
    "notification-channel-edit": "the form of one channel: its name, kind and target",
    "schedule-pause": "POST",
    "schedule-resume": "POST",
    "schedule-run-now": "POST",
    "schedule-delete": "POST",
    "failure-state": "POST",
    "team-freeze": "POST",
    "team-unfreeze": "POST",
    "team-member-set": "POST",
    "team-member-remove": "POST",
    "slack-unlink": "POST",
    "slack-link": "a signed link Slack shows (tests/test_slack_approvals.py opens it)",
    "email-approval": "a signed e-mailed link (tests/test_email_approvals.py opens it)",
}


def _patterns() -> list[URLPattern]:
    return [p for p in urls.urlpatterns if isinstance(p, URLPattern) and p.name]


def _plain(pattern: URLPattern) -> bool:
    """A route without arguments: rendered as it is (a POST-only one answers 405)."""
    return "<" not in str(pattern.pattern)


def page_urls(world: World) -> Iterator[str]:
    for pattern in _patterns():
        if _plain(pattern) and pattern.name not in NOT_PAGES:
            yield reverse(f"runs:{pattern.name}")
    yield reverse("runs:run-list") + "?status=waiting"
    yield reverse("runs:run-list") + "?status=done"
    yield reverse("runs:inbox") + "?who=unassigned"
    for run in world.runs.values():
        for name in RUN_PAGES:
            yield reverse(f"runs:{name}", args=[run.pk])
        yield reverse("runs:run-fork-form", args=[run.pk])
        yield reverse("runs:run-trace-events", args=[run.pk]) + "?seq=1&seq=2&seq=3&seq=4&seq=5"
        for name in THREAD_PAGES:
            yield reverse(f"runs:{name}", args=[run.thread_id])
    yield reverse("runs:team-detail", args=["default"])
    yield reverse("runs:ticket-rule", args=[world.tickets["decided"].pk])
    compare = reverse("runs:run-compare")
    yield f"{compare}?a={world.run('approved').pk}&b={world.run('rejected').pk}"
    yield f"{compare}?a={world.run('approval').pk}&b={world.run('cancelled').pk}"


def test_every_page_is_rendered_or_said_not_to_be_a_page():
    """A route with arguments is rendered by page_urls or listed in NOT_PAGES (the
    routes without are all rendered)."""
    covered = {*RUN_PAGES, *THREAD_PAGES, *NOT_PAGES}
    covered |= {"run-fork-form", "run-trace-events", "team-detail", "ticket-rule"}
    covered |= {"replay-detail", "replay-table"}  # test_the_replay_pages_in_plain_words
    covered |= {"schedule-detail", "schedule-edit"}  # test_the_schedule_pages_in_plain_words
    names = {p.name for p in _patterns() if not _plain(p)}
    assert names - covered == set(), "render these in page_urls, or list them in NOT_PAGES"


def test_no_page_shows_a_raw_value(root_client):
    world = build_world()
    shown: dict[str, list[str]] = {}
    for url in page_urls(world):
        response = root_client.get(url, HTTP_HX_REQUEST="true" if "/row" in url else "")
        if response.status_code == 405:  # an action (POST) without arguments
            continue
        assert response.status_code in (200, 400), (url, response.status_code)
        found = raw_values_shown(response.content.decode())
        if found:
            shown[url] = found
    assert not shown, summary(shown)


def test_an_operator_sees_plain_words_in_the_inbox_and_on_the_thread_page(operator_client):
    world = build_world()
    pages = [reverse("runs:inbox"), reverse("runs:inbox-list")]
    pages += [reverse("runs:thread-detail", args=[run.thread_id]) for run in world.runs.values()]
    shown = {}
    for url in pages:
        found = raw_values_shown(operator_client.get(url).content.decode())
        if found:
            shown[url] = found
    assert not shown, summary(shown)


def test_the_technical_value_is_on_hover(root_client):
    world = build_world()
    page = root_client.get(reverse("runs:run-detail", args=[world.run("rejected").pk]))
    badge = re.search(
        r'<span id="run-status"><span class="badge[^"]*" title="([^"]*)">([^<]*)<',
        page.content.decode(),
    )
    assert badge is not None
    assert badge.groups() == ("done · natural", "Finished — action rejected")
    page = root_client.get(
        reverse("runs:run-detail", args=[world.run("approval").pk])
    ).content.decode()
    assert 'title="waiting · suspended"' in page
    assert 'title="tool:PermissionConfirm · perm_' in page


def test_the_replay_pages_in_plain_words(root_client):
    from tests.runs.replays.test_replays import create

    agent = scripted_agent([{"text": "ok"}], slug="paged")
    drive(run_start(agent=agent, messages="m0"))
    replay_set = create(agent, concurrency=1)
    shown = {}
    for name in ("replay-detail", "replay-table", "replays"):
        url = reverse(f"runs:{name}", args=[replay_set.pk] if name != "replays" else [])
        found = raw_values_shown(root_client.get(url).content.decode())
        if found:
            shown[url] = found
    assert not shown, summary(shown)


def test_the_tool_message_placeholder_is_said_plainly(root_client):
    run = waiting_run("lunch")
    page = root_client.get(reverse("runs:run-transcript", args=[run.pk])).content.decode()
    assert "suspended: awaiting decision" not in page
    assert "write_note is waiting for a decision before it runs." in page


def test_the_schedule_pages_in_plain_words(root_client):
    from runs.services.submission_flow import run_start as start
    from tests.runs.operations.test_schedules import make

    schedule = make(name="nightly")
    run = drive(start(agent=schedule.agent, messages="the nightly one"))
    Run.objects.filter(pk=run.pk).update(status_reason="error")
    shown = {}
    for name in ("schedule-detail", "schedule-edit"):
        url = reverse(f"runs:{name}", args=[schedule.pk])
        response = root_client.get(url)
        assert response.status_code == 200, url
        found = raw_values_shown(response.content.decode())
        if found:
            shown[url] = found
    assert not shown, summary(shown)
