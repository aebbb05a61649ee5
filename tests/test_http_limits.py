"""The server's limits on a request's head (awaken_site/http_limits.py): a long address
reaches the app instead of being dropped by Twisted without an answer, and one longer
than the server takes gets a 400 that says why."""

from __future__ import annotations

from typing import Any

import pytest
from twisted.internet.testing import StringTransport
from twisted.protocols import basic
from twisted.web import http

from awaken_site import http_limits


def send(line_length: int) -> tuple[bytes, bool]:
    """What the server writes for a GET whose request line is about `line_length` long,
    and whether it closes the connection."""
    channel = http.HTTPChannel()
    transport = StringTransport()
    channel.makeConnection(transport)
    target = b"/runs/?q=" + b"a" * line_length
    channel.dataReceived(b"GET " + target + b" HTTP/1.1\r\nHost: testserver\r\n\r\n")
    return transport.value(), transport.disconnecting


@pytest.fixture
def installed(monkeypatch: Any) -> None:
    for name in ("MAX_LENGTH", "totalHeadersSize", "lineLengthExceeded"):
        monkeypatch.setattr(http.HTTPChannel, name, getattr(http.HTTPChannel, name))
    http_limits.install()


def test_without_the_limits_twisted_drops_a_20k_address_without_a_word(monkeypatch):
    # Twisted's own settings (importing awaken_site.asgi in this process installs ours)
    monkeypatch.setattr(http.HTTPChannel, "MAX_LENGTH", 16384)
    monkeypatch.setattr(http.HTTPChannel, "totalHeadersSize", 16384)
    monkeypatch.setattr(
        http.HTTPChannel, "lineLengthExceeded", basic.LineReceiver.lineLengthExceeded
    )
    assert send(20_000) == (b"", True)  # the browser's ERR_EMPTY_RESPONSE


def test_a_20k_address_reaches_the_app(installed):
    written, closed = send(20_000)
    assert not closed and b"400" not in written


def test_a_head_too_long_even_so_gets_a_400_saying_why(installed):
    written, closed = send(http_limits.REQUEST_LINE_MAX_BYTES + 1)
    assert closed
    head, _, body = written.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 Bad Request")
    assert b"Content-Length: " + str(len(body)).encode() in head
    assert b"longer than 65536 bytes" in body
