"""The Content-Security-Policy header, and templates it does not have to relax for: plain
tests (Django's test client and the template files; no browser)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse

from tests.factories import user_with_role

TEMPLATES = Path(settings.BASE_DIR) / "templates"
# what a policy without 'unsafe-inline' blocks: style attributes, style blocks, inline
# script bodies and on* event handler attributes
INLINE = {
    "style attribute": re.compile(r"\sstyle\s*=", re.I),
    "style block": re.compile(r"<style[\s>]", re.I),
    "inline script": re.compile(r"<script(?![^>]*\bsrc\s*=)[^>]*>", re.I),
    "event handler attribute": re.compile(r"\son[a-z]+\s*=", re.I),
}


def policy(response) -> dict[str, list[str]]:
    header = response.headers.get("Content-Security-Policy")
    assert header, f"no Content-Security-Policy on {response.request['PATH_INFO']}"
    directives = {}
    for part in header.split(";"):
        name, *sources = part.split()
        directives[name] = sources
    return directives


@pytest.mark.django_db
def test_the_login_page_carries_a_policy_without_unsafe_inline(client: Client):
    response = client.get(reverse("login"))
    assert response.status_code == 200
    csp = policy(response)
    assert "'unsafe-inline'" not in response.headers["Content-Security-Policy"]
    assert "'unsafe-eval'" not in response.headers["Content-Security-Policy"]
    assert csp["default-src"] == ["'self'"]
    assert csp["script-src"] == ["'self'"] and csp["style-src"] == ["'self'"]
    assert csp["img-src"] == ["'self'", "data:"]
    assert csp["connect-src"][0] == "'self'"  # 'self' covers ws:/wss: on the same host
    assert csp["frame-ancestors"] == ["'none'"] and csp["object-src"] == ["'none'"]
    assert csp["base-uri"] == ["'self'"] and csp["form-action"] == ["'self'"]
    assert "<script" not in response.content.decode()  # nothing to run before logging in


@pytest.mark.django_db
@pytest.mark.parametrize(
    "name, scripts",
    [
        ("runs:dashboard", ["js/page_actions.js", "js/time_display.js", "js/live_stream.js"]),
        (
            "runs:run-list",
            ["js/page_actions.js", "js/time_display.js", "js/live_stream.js", "js/compare_pick.js"],
        ),
        ("runs:replays", ["js/page_actions.js", "js/time_display.js"]),
        (
            "runs:inbox",
            ["js/page_actions.js", "js/time_display.js", "js/live_stream.js", "js/inbox_keys.js"],
        ),
        ("runs:thread-list", ["js/page_actions.js", "js/time_display.js"]),
        ("runs:tokens", ["js/page_actions.js", "js/time_display.js"]),
        ("api-docs", ["js/api_docs.js"]),
    ],
)
def test_each_page_loads_its_own_modules_under_the_policy(client: Client, name, scripts):
    client.force_login(user_with_role("operator", "alice"))
    response = client.get(reverse(name))
    assert response.status_code == 200
    assert "'unsafe-inline'" not in policy(response)["script-src"]
    html = response.content.decode()
    loaded = re.findall(r"""<script[^>]*\bsrc="[^"]*/static/([^"]+)\"""", html)
    assert [src for src in loaded if src.startswith("js/")] == scripts
    assert "data-socket-url" in html or "js/live_stream.js" not in scripts


def test_no_template_has_inline_script_or_style():
    found = []
    for path in sorted(TEMPLATES.rglob("*.html")):
        text = re.sub(
            r"{%\s*comment\s*%}.*?{%\s*endcomment\s*%}|{#.*?#}", "", path.read_text(), flags=re.S
        )
        for what, pattern in INLINE.items():
            for match in pattern.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                found.append(f"{path.relative_to(TEMPLATES)}:{line}: {what}")
    assert not found, "\n".join(found)
