"""A long unbroken token (pasted base64) as large as the limits allow, in a message, a
question, an answer and pending input: every page that shows it wraps it within the
viewport (1280 and 390 px wide) and renders it quickly; a larger one is refused with a
clear error and nothing is lost (common/limits.py)."""

from __future__ import annotations

import base64
import os
import time
from typing import Any

from django.conf import settings
from playwright.sync_api import expect

from common.audit import Actor
from runs.models import Run, Ticket
from runs.services.submission_flow import input_submit
from runs.services.tickets import decision_submit
from tests.browser.helpers import login, start_run, wait_status
from tests.factories import call, scripted_agent, user_with_role

WIDTHS = (1280, 390)
# A page with the token must be usable at once; measured it took 18-26 s to render a
# 100,000-character one. The margin is for a busy two-core machine.
RENDERED_WITHIN_S = 3.0
PAGE_WIDTH = """() => ({
  scroll: document.documentElement.scrollWidth,
  client: document.documentElement.clientWidth,
})"""
# the text that sticks out on the right, for the failure message
WIDE = """() => {
  const out = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const range = document.createRange();
    range.selectNodeContents(node);
    const box = range.getBoundingClientRect();
    if (box.right > document.documentElement.clientWidth + 1) {
      const parent = node.parentElement;
      out.push(parent.tagName + "." + parent.className + "#" + parent.id);
    }
  }
  return out.slice(0, 6);
}"""
ACTOR = Actor(label="ops", source="ui")


def token(length: int) -> str:
    return base64.b64encode(os.urandom(length))[:length].decode()


def asking_run(page: Any, message: str) -> Run:
    """A run the server starts from the thread form and runs until it asks."""
    return wait_status(start_run(page, "asker", message), "waiting")


def test_a_long_token_wraps_and_renders_quickly_on_every_page(new_page):
    long = token(settings.AWAKEN_MAX_MESSAGE_CHARS - 100)
    scripted_agent(
        [
            {"text": "", "tool_calls": [call("ask_human", {"question": "Paste the key"})]},
            {"text": "thanks"},
        ],
        slug="asker",
        tools=["ask_human"],
    )
    user_with_role("operator", "opa")
    page = new_page()
    login(page, "opa")
    answered = asking_run(page, f"read this key {long} please")
    ticket = Ticket.objects.get(run=answered)
    decision_submit(ticket=ticket, action="respond", payload=long, comment="", actor=ACTOR)
    answered = wait_status(str(answered.pk), "done", timeout=30)
    waiting = asking_run(page, f"and this one {long}")
    input_submit(agent=None, messages=long, thread=waiting.thread, mode="queue", actor=ACTOR)

    pages = {
        "thread page (answered)": f"/threads/{answered.thread_id}/",
        "run page (answered)": f"/runs/{answered.pk}/",
        "thread page (pending input)": f"/threads/{waiting.thread_id}/",
        "run page (question)": f"/runs/{waiting.pk}/",
        "inbox": "/inbox/",
        "compare": f"/runs/compare/?a={answered.pk}&b={waiting.pk}",
    }
    problems: list[str] = []
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        for where, url in pages.items():
            started = time.monotonic()
            page.goto(url)
            expect(page.locator("main h1").first).to_be_visible()
            page.evaluate("() => new Promise((done) => requestAnimationFrame(() => done()))")
            took = time.monotonic() - started
            size: dict[str, Any] = page.evaluate(PAGE_WIDTH)
            if size["scroll"] > size["client"]:
                wide = page.evaluate(WIDE)
                problems.append(f"{where} at {width} px: {size['scroll']} px wide: {wide}")
            if took > RENDERED_WITHIN_S:
                problems.append(f"{where} at {width} px: {took:.1f} s")
    assert not problems, problems
