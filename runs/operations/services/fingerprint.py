"""Failure fingerprints: which failed runs are "the same failure" (runs/operations/services/failures.py).

A fingerprint hashes three things: the error type (the run's reason: `error`, `timeout`,
`stopped:<condition>`), where it failed (the provider or remote endpoint the run's agent
uses, or the tool the message names) and the message with everything that differs from
one occurrence to the next masked: quoted values, URLs' paths and queries, UUIDs, long
hexadecimal strings, ids that mix letters and digits, and numbers. "provider error 503:
upstream 'req_8f3a…' failed" and "provider error 502: upstream 'req_91bc…' failed" are
one failure; "cannot reach provider" and "provider timed out" are two.

Plain Python: no Django, so the same code groups the runs of the backfill
(`manage.py group_failures`) and those failing now."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

TITLE_CHARS = 300  # the masked message, as a group's title
SAMPLE_CHARS = 1000  # one occurrence's message, as the group keeps it
MASK = "<…>"  # what a masked value reads as

_QUOTED = re.compile(r"'[^'\n]{0,400}'|\"[^\"\n]{0,400}\"|`[^`\n]{0,400}`")
_UUID = re.compile(
    r"\b[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}\b"
)
_HEX = re.compile(
    r"\b(?:0x)?[0-9a-fA-F]*[0-9][0-9a-fA-F]*[a-fA-F][0-9a-fA-F]*\b|\b0x[0-9a-fA-F]+\b"
)
# a word holding a digit and either letters or an id separator: req_8f3aZ, perm_call_12, run-7
_ID = re.compile(r"\b(?=[\w.-]*\d)(?=[\w.-]*[A-Za-z_])[A-Za-z0-9][\w.-]*\b")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_URL_TAIL = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^\s/'\"]+)(/[^\s'\"]*)?")
_SPACES = re.compile(r"\s+")
_TOOL = re.compile(r"\btool[\s:]+['\"`]?([A-Za-z_][\w.-]{0,199})['\"`]?", re.IGNORECASE)


def _host(match: re.Match[str]) -> str:
    """A URL kept as its scheme and host (ports and paths vary)."""
    return re.sub(r":\d+$", ":" + MASK, match.group(1)) + (f"/{MASK}" if match.group(2) else "")


def masked(message: str) -> str:
    """`message` with what varies between occurrences replaced by `MASK`, its spaces
    collapsed: the part of the fingerprint a person reads (a group's title)."""
    text = _SPACES.sub(" ", message or "").strip()
    text = _URL_TAIL.sub(_host, text)
    text = _QUOTED.sub(MASK, text)
    text = _UUID.sub(MASK, text)
    text = _HEX.sub(MASK, text)
    text = _ID.sub(MASK, text)
    text = _NUMBER.sub(MASK, text)
    return text


def tool_named(message: str) -> str:
    """The tool a failure's message names ("tool 'write_note' failed"), or ''."""
    match = _TOOL.search(message or "")
    return match.group(1) if match else ""


@dataclass(frozen=True)
class Fingerprint:
    digest: str  # 64 hex characters
    error_type: str
    source: str  # provider:<slug>, endpoint:<slug>, tool:<name>, or ''
    title: str  # the masked message (at most TITLE_CHARS)


def fingerprint(error_type: str, source: str, message: str) -> Fingerprint:
    """The fingerprint of a failure of type `error_type` at `source` saying `message`.
    A message naming a tool is grouped by that tool rather than by `source`."""
    tool = tool_named(message)
    where = f"tool:{tool}" if tool else source
    title = masked(message) or "(no message)"
    key = "\x1f".join((error_type, where, title))
    digest = hashlib.sha256(key.encode("utf-8", "replace")).hexdigest()
    return Fingerprint(digest, error_type, where, title[:TITLE_CHARS])
