"""A fake Slack Web API on loopback for the Slack approval tests: a real HTTP server that
answers the methods our Slack app calls (chat.postMessage, chat.update,
chat.postEphemeral, views.open, users.info) as Slack does, and records every call; and
interaction requests signed as Slack signs them (v0 HMAC-SHA256 of
`v0:<timestamp>:<body>`, the body `payload=<url-encoded JSON>`)."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit


class FakeSlack:
    """Records `calls` as (method, arguments); `users` answers users.info; `fail` maps a
    method to the error Slack answers it with (`{"ok": false, "error": ...}`)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.users: dict[str, dict[str, Any]] = {}
        self.fail: dict[str, str] = {}
        self._ts = itertools.count(1)
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, arguments: dict[str, Any]) -> None:
                method = urlsplit(self.path).path.rsplit("/", 1)[-1]
                with fake._lock:
                    fake.calls.append((method, arguments))
                body = json.dumps(fake.answer(method, arguments)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if "json" in (self.headers.get("Content-Type") or ""):
                    arguments = json.loads(raw or b"{}")
                else:
                    arguments = dict(parse_qsl(raw.decode()))
                arguments.update(dict(parse_qsl(urlsplit(self.path).query)))
                self._answer(arguments)

            def do_GET(self) -> None:
                self._answer(dict(parse_qsl(urlsplit(self.path).query)))

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/api/"

    def answer(self, method: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if method in self.fail:
            return {"ok": False, "error": self.fail[method]}
        if method == "chat.postMessage":
            ts = f"1700000000.{next(self._ts):06d}"
            return {"ok": True, "channel": arguments.get("channel"), "ts": ts}
        if method == "chat.update":
            return {"ok": True, "channel": arguments.get("channel"), "ts": arguments.get("ts")}
        if method == "chat.postEphemeral":
            return {"ok": True, "message_ts": "1700000000.999999"}
        if method == "views.open":
            return {"ok": True, "view": {"id": "V1"}}
        if method == "users.info":
            user = self.users.get(str(arguments.get("user")))
            return {"ok": True, "user": user} if user else {"ok": False, "error": "user_not_found"}
        return {"ok": False, "error": "unknown_method"}

    def of(self, method: str) -> list[dict[str, Any]]:
        with self._lock:
            return [arguments for name, arguments in self.calls if name == method]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def signed(
    secret: str, payload: dict[str, Any], timestamp: int | None = None
) -> tuple[bytes, dict[str, str]]:
    """The body and headers of an interaction request as Slack sends it."""
    body = urlencode({"payload": json.dumps(payload)}).encode()
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    mac = hmac.new(secret.encode(), f"v0:{stamp}:".encode() + body, hashlib.sha256)
    return body, {
        "HTTP_X_SLACK_REQUEST_TIMESTAMP": stamp,
        "HTTP_X_SLACK_SIGNATURE": f"v0={mac.hexdigest()}",
    }


def block_action(
    action_id: str,
    ticket_id: Any,
    *,
    user: str = "U1",
    team: str = "T1",
    trigger: str = "trig-1",
    channel: str = "C1",
    ts: str = "1700000000.000001",
) -> dict[str, Any]:
    """A block_actions payload as Slack builds it for a button press on our message."""
    return {
        "type": "block_actions",
        "team": {"id": team, "domain": "acme"},
        "user": {"id": user, "username": f"user-{user}", "team_id": team},
        "api_app_id": "A1",
        "trigger_id": trigger,
        "container": {"type": "message", "message_ts": ts, "channel_id": channel},
        "channel": {"id": channel, "name": "approvals"},
        "message": {"ts": ts, "type": "message"},
        "response_url": "https://hooks.slack.com/actions/T1/1/x",
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "block_id": f"ticket:{ticket_id}",
                "value": str(ticket_id),
                "action_ts": "1700000001.000001",
            }
        ],
    }


def view_submission(
    private_metadata: str,
    block: str,
    text: str,
    *,
    user: str = "U1",
    team: str = "T1",
    view_id: str = "V1",
) -> dict[str, Any]:
    """A view_submission payload of our modal, as Slack builds it."""
    return {
        "type": "view_submission",
        "team": {"id": team, "domain": "acme"},
        "user": {"id": user, "username": f"user-{user}", "team_id": team},
        "api_app_id": "A1",
        "trigger_id": f"trig-{view_id}",
        "view": {
            "id": view_id,
            "type": "modal",
            "callback_id": "awaken_decide",
            "private_metadata": private_metadata,
            "state": {"values": {block: {block: {"type": "plain_text_input", "value": text}}}},
        },
    }
