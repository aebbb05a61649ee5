"""`http_get`: fetch a public web page through the SSRF guard, pinned to the vetted
address, never following redirects. `open_connection` and `tls_context` are the seams
tests replace."""

from __future__ import annotations

import http.client
import socket
import ssl
import time
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

from runs.runtime.netguard import AddressRefusedError, vetted_addresses
from runs.runtime.ports import ToolCallContext
from runs.runtime.types import ToolDescriptor, ToolResult


class FetchError(Exception):
    """A refused URL or address, or an aborted fetch; the message is for the model."""


def open_connection(address: str, port: int, timeout: float) -> socket.socket:
    """A TCP connection to an IP address (no name lookup happens here)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect((address, port))
    except BaseException:
        sock.close()
        raise
    return sock


def parse_http_url(url: str) -> tuple[str, int, str, bool]:
    """(ASCII host, port, request target, is TLS) of an absolute http(s) URL without
    credentials, or ValueError saying what is wrong with it."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"Invalid URL: {exc}.") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise ValueError("Only http and https URLs are allowed.")
    if not parts.hostname:
        raise ValueError("The URL has no host.")
    if parts.username is not None or parts.password is not None:
        raise ValueError("URLs with credentials are not allowed.")
    try:
        host = parts.hostname.encode("idna").decode("ascii")
    except UnicodeError:
        raise ValueError(f"Invalid host name '{parts.hostname}'.") from None
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    default_port = 443 if scheme == "https" else 80
    return host, port or default_port, target, scheme == "https"


def tls_context() -> ssl.SSLContext:
    """Certificate- and hostname-verifying client context (a seam for tests)."""
    return ssl.create_default_context()


class PinnedConnection(http.client.HTTPConnection):
    """An HTTP(S) connection to already-vetted addresses: the hostname is used only for the
    Host header and TLS (SNI and certificate check), never resolved again, so DNS rebinding
    between the check and the connect cannot reach a private address."""

    def __init__(
        self,
        host: str,
        port: int,
        addresses: list[str],
        timeout: float,
        tls: ssl.SSLContext | None,
    ) -> None:
        super().__init__(host, port, timeout=timeout)
        self._timeout = timeout
        self._addresses = addresses
        self._tls = tls
        self.connected_address: str | None = None

    def connect(self) -> None:
        last_error: OSError | None = None
        for address in self._addresses:
            try:
                sock = open_connection(address, self.port, self._timeout)
            except OSError as exc:
                last_error = exc
                continue
            if self._tls is not None:
                try:
                    sock = self._tls.wrap_socket(sock, server_hostname=self.host)
                except BaseException:
                    sock.close()
                    raise
            self.sock = sock
            self.connected_address = address
            return
        raise last_error or OSError("no address to connect to")


class HttpGetTool:
    """Fetch a public web page. Refuses private, loopback and metadata addresses (SSRF) unless
    AWAKEN_HTTP_GET_ALLOW_PRIVATE, pins the vetted address and never follows redirects, so
    every hop is a fresh, checked call."""

    name = "http_get"
    # a replay with recorded HTTP answers from the original run's result (docs/replays.md)
    replay_recorded = True
    max_bytes_limit = 10_000_000
    user_agent = "awaken-ops-http_get/1.0"

    @property
    def descriptor(self) -> ToolDescriptor:
        return ToolDescriptor(
            name=self.name,
            description=(
                "HTTP GET a public http(s) URL and return the status, a few headers and the "
                "body as text. Redirects are not followed: the Location header is returned."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "url": {
                        "type": "string",
                        "minLength": 8,
                        "maxLength": 2048,
                        "pattern": r"^[Hh][Tt][Tt][Pp][Ss]?://[^\s]+$",
                    },
                    "max_bytes": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": self.max_bytes_limit,
                        "description": "Cap on the body size (the server setting caps it too).",
                    },
                },
                "required": ["url"],
                "additionalProperties": False,
            },
        )

    def execute(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
        url: str = arguments["url"]
        setting_cap = int(settings.AWAKEN_HTTP_GET_MAX_BYTES)
        requested = arguments.get("max_bytes")
        cap = min(int(requested), setting_cap) if requested is not None else setting_cap
        timeout = float(settings.AWAKEN_HTTP_GET_TIMEOUT)
        allow_private = bool(getattr(settings, "AWAKEN_HTTP_GET_ALLOW_PRIVATE", False))
        try:
            return self._fetch(url, cap, timeout, allow_private, ctx)
        except FetchError as exc:
            return ToolResult.error(self.name, str(exc))
        except TimeoutError:
            return ToolResult.error(self.name, f"Timed out fetching {url} after {timeout:g}s.")
        except ssl.SSLError as exc:  # includes certificate verification failures
            return ToolResult.error(self.name, f"TLS error fetching {url}: {exc}.")
        except http.client.HTTPException as exc:
            return ToolResult.error(
                self.name, f"Invalid HTTP response from {url}: {type(exc).__name__} {exc}."
            )
        except OSError as exc:
            return ToolResult.error(self.name, f"Could not fetch {url}: {exc}.")

    def _fetch(
        self, url: str, cap: int, timeout: float, allow_private: bool, ctx: ToolCallContext
    ) -> ToolResult:
        deadline = time.monotonic() + timeout
        host, port, target, tls = self._parse(url)
        try:
            addresses = vetted_addresses(host, port, allow_private=allow_private)
        except AddressRefusedError as exc:
            raise FetchError(f"Refused to fetch {url}: {exc}.") from None
        if ctx.cancel.is_cancelled():
            raise FetchError("Cancelled before fetching.")

        connection = PinnedConnection(
            host, port, addresses, timeout, tls_context() if tls else None
        )
        try:
            connection.request(
                "GET",
                target,
                headers={
                    "User-Agent": self.user_agent,
                    "Accept": "*/*",
                    "Accept-Encoding": "identity",
                    "Connection": "close",
                },
            )
            response = connection.getresponse()
            body, truncated = self._read_body(connection, response, cap, deadline, ctx)
        finally:
            connection.close()

        charset = response.headers.get_content_charset() or "utf-8"
        try:
            text = body.decode(charset, errors="replace")
        except LookupError:
            text = body.decode("utf-8", errors="replace")
        headers = {
            key: response.headers[key]
            for key in ("content-type", "content-length", "location")
            if response.headers.get(key) is not None
        }
        return ToolResult.success(
            self.name,
            {
                "url": url,
                "status": response.status,
                "headers": headers,
                "body": text,
                "truncated": truncated,
            },
        )

    @staticmethod
    def _parse(url: str) -> tuple[str, int, str, bool]:
        """(ASCII host, port, request target, is TLS) or FetchError."""
        try:
            return parse_http_url(url)
        except ValueError as exc:
            raise FetchError(str(exc)) from None

    @staticmethod
    def _read_body(
        connection: PinnedConnection,
        response: http.client.HTTPResponse,
        cap: int,
        deadline: float,
        ctx: ToolCallContext,
    ) -> tuple[bytes, bool]:
        """Up to `cap` bytes, within the overall deadline; reads one byte more to detect
        truncation without downloading the rest."""
        chunks: list[bytes] = []
        received = 0
        while received <= cap:
            if ctx.cancel.is_cancelled():
                raise FetchError("Cancelled while reading the response.")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            if connection.sock is not None:
                connection.sock.settimeout(remaining)
            chunk = response.read1(min(65_536, cap + 1 - received))
            if not chunk:
                break
            chunks.append(chunk)
            received += len(chunk)
        body = b"".join(chunks)
        return body[:cap], len(body) > cap
