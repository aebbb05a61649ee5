"""A Slack-style rendering of a ticket's Slack message for the README
(static/docs/slack-message.png): the message our Slack app posts while the ticket waits
(its arguments and buttons), the same message rewritten after a decision, and what the
second operator to press is told. The blocks are the ones `notify_slack.ticket_message`
builds; this renders the few Block Kit elements they use in Slack's look and captures
them with Chromium. No database, no server.

    .venv/bin/python -m tests.browser.slack_preview [--out static/docs]
"""

from __future__ import annotations

import argparse
import datetime as dt
import html
import os
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EMOJI = {  # as marks the machine's fonts have
    ":white_check_mark:": '<span class="ok">✓</span>',
    ":x:": '<span class="no">✗</span>',
    ":hourglass:": '<span class="no">⧖</span>',
    ":no_entry_sign:": '<span class="no">⊘</span>',
}
STYLE = """
body { font: 15px/1.47 -apple-system, 'Segoe UI', Lato, sans-serif; color: #1d1c1d;
  background: #fff; margin: 0; padding: 16px 20px; width: 760px; }
.channel { font-weight: 800; font-size: 18px; border-bottom: 1px solid #ddd;
  padding-bottom: 10px; margin-bottom: 6px; }
.msg { display: flex; gap: 8px; padding: 8px 0; }
.avatar { width: 36px; height: 36px; border-radius: 6px; background: #4a154b; color: #fff;
  font-weight: 800; display: flex; align-items: center; justify-content: center; }
.head b { font-weight: 900; } .app { font-size: 10px; background: #e8e8e8; color: #616061;
  padding: 0 3px; border-radius: 2px; margin: 0 4px; } .time { color: #616061; font-size: 12px; }
pre { background: #f8f8f8; border: 1px solid #ddd; border-radius: 4px; padding: 8px;
  font: 12px/1.5 Monaco, Menlo, monospace; margin: 4px 0; white-space: pre-wrap; }
.buttons { display: flex; gap: 8px; margin-top: 6px; }
.btn { border: 1px solid #bbb; border-radius: 4px; padding: 3px 12px; font-weight: 700;
  font-size: 14px; background: #fff; } .primary { background: #007a5a; color: #fff;
  border-color: #007a5a; } .danger { color: #e01e5a; border-color: #e01e5a; }
.context { color: #616061; font-size: 13px; } a { color: #1264a3; text-decoration: none; }
.ok { color: #fff; background: #007a5a; border-radius: 3px; padding: 0 3px; }
.no { color: #fff; background: #e01e5a; border-radius: 3px; padding: 0 3px; }
.ephemeral { color: #616061; font-size: 12px; } .divider { color: #616061; font-size: 12px;
  text-align: center; margin: 8px 0; }
"""


def mrkdwn(text: str) -> str:
    """Slack's mrkdwn (already escaped by our builder) as HTML: code, bold, links, emoji."""
    out = html.escape(html.unescape(text), quote=False)
    out = re.sub(r"```(.*?)```", lambda m: f"<pre>{m.group(1)}</pre>", out, flags=re.S)
    out = re.sub(r"&lt;([^|&]+)\|([^&]+)&gt;", r'<a href="\1">\2</a>', out)
    out = re.sub(r"\*([^*\n]+)\*", r"<b>\1</b>", out)
    out = re.sub(r"`([^`\n]+)`", r"<code>\1</code>", out)
    for name, char in EMOJI.items():
        out = out.replace(name, char)
    return out.replace("\n", "<br>").replace("<pre><br>", "<pre>")


def block_html(block: dict[str, Any]) -> str:
    if block["type"] == "section":
        return f"<div>{mrkdwn(block['text']['text'])}</div>"
    if block["type"] == "context":
        return f'<div class="context">{mrkdwn(block["elements"][0]["text"])}</div>'
    buttons = "".join(
        f'<span class="btn {element.get("style", "")}">'
        f"{html.escape(element['text']['text'])}</span>"
        for element in block["elements"]
    )
    return f'<div class="buttons">{buttons}</div>'


def message_html(blocks: list[dict[str, Any]], time: str, note: str = "") -> str:
    body = "".join(block_html(block) for block in blocks)
    return (
        '<div class="msg"><div class="avatar">A</div><div>'
        f'<div class="head"><b>Awaken Ops</b><span class="app">APP</span>'
        f'<span class="time">{time}</span>{note}</div>{body}</div></div>'
    )


def page() -> str:
    """The three messages, from the blocks our Slack app builds."""
    from runs.models import Decision, Ticket
    from runs.operations.services.notify_slack import outcome_text, ticket_message

    ticket = Ticket(
        tool_name="send_email",
        arguments={"to": ["press@example.com"], "subject": "Q3 figures", "body": "Attached."},
        message="Send the Q3 figures to the press contact?",
        resume_mode="replay_tool_call",
        status=Ticket.Status.PENDING,
    )
    url = "https://ops.example.com/runs/0190a0a0/"
    waiting = ticket_message(ticket, "approver", url)
    decided_at = dt.datetime(2026, 11, 28, 9, 41, 12, tzinfo=dt.UTC)
    decision = Decision(
        action="approve", actor_label="olga (Slack)", comment="", created_at=decided_at
    )
    ticket.status = Ticket.Status.DECIDED
    decided = ticket_message(ticket, "approver", url, outcome_text(ticket, decision))
    told = [
        {
            "type": "section",
            "text": {
                "type": "mrkdwn",
                "text": "Nothing was decided by you: ticket call_7 was already decided by "
                "olga (Slack) at 2026-11-28T09:41:12+00:00 (approve).",
            },
        }
    ]
    only_you = ' <span class="ephemeral">Only visible to you</span>'
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><style>{STYLE}</style></head>"
        '<body><div class="channel"># approvals</div>'
        + message_html(waiting["blocks"], "9:40 AM")
        + '<div class="divider">— after olga pressed Approve: the same message, rewritten —</div>'
        + message_html(decided["blocks"], "9:40 AM (edited)")
        + '<div class="divider">— oscar pressed a moment later —</div>'
        + message_html(told, "9:41 AM", only_you)
        + "</body></html>"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "static" / "docs"))
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "awaken_site.settings")
    import django

    django.setup()
    from playwright.sync_api import sync_playwright

    from tests.browser.screenshots import CHROMIUM, CHROMIUM_ARGS

    out = Path(args.out) / "slack-message.png"
    with sync_playwright() as play:
        browser = play.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        view = browser.new_page(viewport={"width": 800, "height": 400})
        view.set_content(page())
        view.screenshot(path=str(out), full_page=True)
        browser.close()
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
