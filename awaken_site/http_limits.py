"""The HTTP server's own limits on a request's head (daphne serves on Twisted).

Twisted drops the connection without a word when the request line or a header is longer
than 16 KiB (`LineReceiver.MAX_LENGTH`): a browser shows ERR_EMPTY_RESPONSE for a link
with a long search. The limits are raised here so that such a request reaches the app,
whose pages answer 400 saying which parameter is too long (a search: at most
runs.selectors.filters.SEARCH_MAX_CHARS characters); a head longer still gets a 400 with
a short explanation instead of a dropped connection."""

from __future__ import annotations

from typing import Any

REQUEST_LINE_MAX_BYTES = 64 * 1024  # the request line (method, address, version), a header
HEAD_MAX_BYTES = REQUEST_LINE_MAX_BYTES + 32 * 1024  # the request line and every header

TOO_LONG = (
    f"The request's address or a header is longer than {REQUEST_LINE_MAX_BYTES} bytes. "
    "Shorten the address: a search box takes a few words, not a document.\n"
).encode()


def _too_long(channel: Any, line: bytes) -> None:
    """Answer a head line past the limit with a 400 that says so, then close."""
    channel.transport.write(
        b"HTTP/1.1 400 Bad Request\r\n"
        b"Content-Type: text/plain; charset=utf-8\r\n"
        b"Content-Length: " + str(len(TOO_LONG)).encode() + b"\r\n"
        b"Connection: close\r\n\r\n" + TOO_LONG
    )
    channel.loseConnection()


def install() -> None:
    """Set the limits on Twisted's HTTP channel (its documented MAX_LENGTH and
    totalHeadersSize attributes, read per connection). Call before serving."""
    from twisted.web import http  # noqa: PLC0415  (only the serving process needs Twisted)

    http.HTTPChannel.MAX_LENGTH = REQUEST_LINE_MAX_BYTES
    http.HTTPChannel.totalHeadersSize = HEAD_MAX_BYTES
    http.HTTPChannel.lineLengthExceeded = _too_long  # type: ignore[method-assign]
