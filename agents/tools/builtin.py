"""The built-in tools. Each is a plain class with a strict JSON schema: the runtime validates
arguments against it before `execute`, so `execute` only handles well-typed input and turns
expected failures into error results the model can read and correct."""

from __future__ import annotations

import ast
import http.client
import math
import operator
import socket
import ssl
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import BadHeaderError, send_mail
from django.core.validators import validate_email

from runs.runtime.netguard import AddressRefusedError, vetted_addresses
from runs.runtime.ports import Tool, ToolCallContext
from runs.runtime.types import (
    PendingToolCall,
    SuspendTicket,
    Suspension,
    ToolCallResumeMode,
    ToolDescriptor,
    ToolResult,
)

# A line of text: no CR/LF, so it can never smuggle a mail header.
_SINGLE_LINE = r"^[^\r\n]*$"
# At least one non-space character.
_NOT_BLANK = r"\S"


# --- calculator ----------------------------------------------------------------------------------


class CalculatorError(Exception):
    """An expression the calculator refuses or cannot evaluate; the message is for the model."""


Number = int | float

_MAX_EXPRESSION_LENGTH = 500
_MAX_EXPONENT = 1000
# Integers beyond ~1000 decimal digits are absurd for a calculator and slow to print.
_MAX_INT_BITS = 3322
_MAX_ROUND_DIGITS = 100
_MAX_FUNCTION_ARGS = 50

_BINARY_OPERATORS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}

_UNARY_OPERATORS: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}

_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e}


def _round(value: Number, ndigits: Number | None = None) -> Number:
    if ndigits is None:
        return round(value)
    if not isinstance(ndigits, int):
        raise CalculatorError("round() takes a whole number of digits.")
    if abs(ndigits) > _MAX_ROUND_DIGITS:
        raise CalculatorError(f"round() digits must be within ±{_MAX_ROUND_DIGITS}.")
    return round(value, ndigits)


# name -> (function, min args, max args)
_FUNCTIONS: dict[str, tuple[Callable[..., Number], int, int]] = {
    "sqrt": (math.sqrt, 1, 1),
    "abs": (abs, 1, 1),
    "round": (_round, 1, 2),
    "min": (lambda *args: min(args), 1, _MAX_FUNCTION_ARGS),
    "max": (lambda *args: max(args), 1, _MAX_FUNCTION_ARGS),
    "floor": (math.floor, 1, 1),
    "ceil": (math.ceil, 1, 1),
}


def _checked(value: Any) -> Number:
    """Refuse results that are not real numbers or whose magnitude is absurd."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CalculatorError("The result is not a real number.")
    if isinstance(value, float) and not math.isfinite(value):
        raise CalculatorError("The result is too large (overflow).")
    if isinstance(value, int) and value.bit_length() > _MAX_INT_BITS:
        raise CalculatorError("The result is too large (more than about 1000 digits).")
    return value


def _power(base: Number, exponent: Number) -> Number:
    if abs(exponent) > _MAX_EXPONENT:
        raise CalculatorError(f"Exponents larger than {_MAX_EXPONENT} are not allowed.")
    # |base| >= 2**(bits-1), so the result has at least (bits-1)*exponent+1 bits: refuse before
    # computing anything that large (the result is checked again afterwards).
    if (
        isinstance(base, int)
        and isinstance(exponent, int)
        and exponent > 0
        and (abs(base).bit_length() - 1) * exponent + 1 > _MAX_INT_BITS
    ):
        raise CalculatorError("The result is too large (more than about 1000 digits).")
    return base**exponent


def _evaluate(node: ast.AST) -> Number:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise CalculatorError(f"Unsupported literal: {node.value!r}. Only numbers are allowed.")
        return _checked(node.value)
    if isinstance(node, ast.Name):
        if node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        known = ", ".join(sorted(_CONSTANTS))
        raise CalculatorError(f"Unknown name '{node.id}'. Known constants: {known}.")
    if isinstance(node, ast.UnaryOp):
        unary = _UNARY_OPERATORS.get(type(node.op))
        if unary is None:
            raise CalculatorError(f"Unsupported operator: {type(node.op).__name__}.")
        return _checked(unary(_evaluate(node.operand)))
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.BitXor):
            raise CalculatorError("'^' is not supported; use '**' for powers.")
        binary = _BINARY_OPERATORS.get(type(node.op))
        if binary is None:
            raise CalculatorError(f"Unsupported operator: {type(node.op).__name__}.")
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow):
            return _checked(_power(left, right))
        return _checked(binary(left, right))
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
            known = ", ".join(sorted(_FUNCTIONS))
            raise CalculatorError(f"Unsupported function call. Known functions: {known}.")
        if node.keywords or any(isinstance(arg, ast.Starred) for arg in node.args):
            raise CalculatorError("Functions take plain positional arguments only.")
        function, min_args, max_args = _FUNCTIONS[node.func.id]
        if not min_args <= len(node.args) <= max_args:
            expected = str(min_args) if min_args == max_args else f"{min_args} to {max_args}"
            raise CalculatorError(
                f"{node.func.id}() takes {expected} argument(s), got {len(node.args)}."
            )
        return _checked(function(*(_evaluate(arg) for arg in node.args)))
    raise CalculatorError(f"Unsupported syntax: {type(node).__name__}.")


def evaluate_expression(expression: str) -> Number:
    """Evaluate arithmetic by walking its syntax tree; raises CalculatorError on anything else."""
    if len(expression) > _MAX_EXPRESSION_LENGTH:
        raise CalculatorError(f"Expressions are limited to {_MAX_EXPRESSION_LENGTH} characters.")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError) as exc:
        detail = exc.msg if isinstance(exc, SyntaxError) else str(exc)
        raise CalculatorError(f"Invalid expression: {detail}.") from None
    except (RecursionError, MemoryError):
        raise CalculatorError("The expression is nested too deeply.") from None
    try:
        return _evaluate(tree)
    except ZeroDivisionError:
        raise CalculatorError("Division by zero.") from None
    except OverflowError:
        raise CalculatorError("The result is too large (overflow).") from None
    except RecursionError:
        raise CalculatorError("The expression is nested too deeply.") from None
    except (ValueError, TypeError) as exc:
        raise CalculatorError(f"Math error: {exc}.") from None


class CalculatorTool:
    """Exact arithmetic, because models are unreliable at it; never `eval`s model text."""

    name = "calculator"

    @property
    def descriptor(self) -> ToolDescriptor:
        return ToolDescriptor(
            name=self.name,
            description=(
                "Evaluate an arithmetic expression. Supports numbers, + - * / // % **, "
                "parentheses, sqrt, abs, round, min, max, floor, ceil and the constants pi, e."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "expression": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": _MAX_EXPRESSION_LENGTH,
                        "description": "For example: (2 + 3) * sqrt(16) / 7",
                    }
                },
                "required": ["expression"],
                "additionalProperties": False,
            },
        )

    def execute(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
        expression = arguments["expression"]
        try:
            result = evaluate_expression(expression)
        except CalculatorError as exc:
            return ToolResult.error(self.name, str(exc))
        return ToolResult.success(self.name, {"expression": expression, "result": result})


# --- current_time --------------------------------------------------------------------------------


class CurrentTimeTool:
    """The current date and time: models have no clock of their own."""

    name = "current_time"

    @property
    def descriptor(self) -> ToolDescriptor:
        return ToolDescriptor(
            name=self.name,
            description="Get the current date and time in an IANA time zone (default UTC).",
            parameters={
                "type": "object",
                "properties": {
                    "timezone": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 64,
                        "pattern": r"^[A-Za-z0-9_+\-/]+$",
                        "description": "IANA time zone name, e.g. Europe/Paris. Default: UTC.",
                    }
                },
                "required": [],
                "additionalProperties": False,
            },
        )

    def execute(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
        name = arguments.get("timezone") or "UTC"
        try:
            zone = ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            return ToolResult.error(
                self.name, f"Unknown time zone '{name}'. Use an IANA name such as Europe/Paris."
            )
        now = datetime.now(zone)
        return ToolResult.success(
            self.name,
            {
                "timezone": name,
                "iso": now.isoformat(timespec="seconds"),
                "unix": int(now.timestamp()),
            },
        )


# --- sleep ------------------------------------------------------------------------------------------


class SleepTool:
    """Waits a while, giving way at once to cancellation: for pacing workflows and for
    exercising long-running tool calls (leases, worker crashes, cancellation)."""

    name = "sleep"
    max_seconds = 300

    @property
    def descriptor(self) -> ToolDescriptor:
        return ToolDescriptor(
            name=self.name,
            description="Wait for the given number of seconds (at most 300) before continuing.",
            parameters={
                "type": "object",
                "properties": {
                    "seconds": {"type": "number", "minimum": 0, "maximum": self.max_seconds}
                },
                "required": ["seconds"],
                "additionalProperties": False,
            },
        )

    def execute(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
        seconds = float(arguments["seconds"])
        if ctx.cancel.wait(seconds):
            return ToolResult.error(self.name, f"cancelled before {seconds:g} seconds had passed")
        return ToolResult.success(self.name, {"slept_seconds": seconds})


# --- write_note ----------------------------------------------------------------------------------


# Note.tool_call_id's max_length: a longer call id could not be stored (nor deduplicated).
_NOTE_CALL_ID_MAX_LENGTH = 200


class WriteNoteTool:
    """Persist a note: a real side effect, so a replayed call must not write it twice."""

    name = "write_note"

    @property
    def descriptor(self) -> ToolDescriptor:
        return ToolDescriptor(
            name=self.name,
            description="Save a note with a title and a body for the operators to read later.",
            parameters={
                "type": "object",
                "properties": {
                    "title": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 200,
                        "pattern": _NOT_BLANK,
                    },
                    "body": {"type": "string", "maxLength": 20_000},
                },
                "required": ["title", "body"],
                "additionalProperties": False,
            },
        )

    def execute(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
        from agents.models import Note
        from runs.models import Run

        title = arguments["title"].strip()
        body = arguments.get("body", "")
        if not title:
            return ToolResult.error(self.name, "The title must not be blank.")
        call_id = ctx.call_id or ""
        if len(call_id) > _NOTE_CALL_ID_MAX_LENGTH:
            return ToolResult.error(self.name, "The tool call id is too long to record.")
        run = None
        try:
            run = Run.objects.filter(pk=uuid.UUID(str(ctx.run_id))).only("pk").first()
        except ValueError:
            run = None
        if run is not None and call_id:
            # Keyed on (run, call): a replay after a worker crash returns the first note.
            note, _ = Note.objects.get_or_create(
                run=run, tool_call_id=call_id, defaults={"title": title, "body": body}
            )
        else:
            # No run row to key on (e.g. outside a persisted run): nothing to dedupe against.
            note = Note.objects.create(run=None, tool_call_id=call_id, title=title, body=body)
        return ToolResult.success(self.name, {"note_id": note.pk, "title": note.title})


# --- send_email ----------------------------------------------------------------------------------


class SendEmailTool:
    """Send a plain-text email from DEFAULT_FROM_EMAIL through Django's configured backend."""

    name = "send_email"
    max_recipients = 10

    @property
    def descriptor(self) -> ToolDescriptor:
        return ToolDescriptor(
            name=self.name,
            description=f"Send a plain-text email to 1-{self.max_recipients} recipients.",
            parameters={
                "type": "object",
                "properties": {
                    "to": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": self.max_recipients,
                        "uniqueItems": True,
                        "items": {
                            "type": "string",
                            "format": "email",
                            "minLength": 3,
                            "maxLength": 254,
                            "pattern": _SINGLE_LINE,
                        },
                    },
                    "subject": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 200,
                        "pattern": _SINGLE_LINE,
                    },
                    "body": {"type": "string", "maxLength": 20_000},
                },
                "required": ["to", "subject", "body"],
                "additionalProperties": False,
            },
        )

    def execute(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
        recipients: list[str] = [address.strip() for address in arguments["to"]]
        subject: str = arguments["subject"]
        body: str = arguments.get("body", "")
        invalid = []
        for address in recipients:
            try:
                validate_email(address)
            except ValidationError:
                invalid.append(address)
        if invalid:
            return ToolResult.error(
                self.name, f"Invalid email address(es): {', '.join(repr(a) for a in invalid)}."
            )
        if "\n" in subject or "\r" in subject or not subject.strip():
            return ToolResult.error(self.name, "The subject must be a single non-blank line.")
        try:
            sent = send_mail(
                subject, body, settings.DEFAULT_FROM_EMAIL, recipients, fail_silently=False
            )
        except BadHeaderError as exc:
            return ToolResult.error(self.name, f"Refused to send: {exc}.")
        except OSError as exc:  # includes smtplib.SMTPException and connection errors
            return ToolResult.error(self.name, f"Sending failed: {exc}.")
        return ToolResult.success(self.name, {"sent": sent, "to": recipients})


# --- http_get ------------------------------------------------------------------------------------


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


def tls_context() -> ssl.SSLContext:
    """Certificate- and hostname-verifying client context (a seam for tests)."""
    return ssl.create_default_context()


class _PinnedConnection(http.client.HTTPConnection):
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

        connection = _PinnedConnection(
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
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise FetchError(f"Invalid URL: {exc}.") from None
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https"):
            raise FetchError("Only http and https URLs are allowed.")
        if not parts.hostname:
            raise FetchError("The URL has no host.")
        if parts.username is not None or parts.password is not None:
            raise FetchError("URLs with credentials are not allowed.")
        try:
            host = parts.hostname.encode("idna").decode("ascii")
        except UnicodeError:
            raise FetchError(f"Invalid host name '{parts.hostname}'.") from None
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        default_port = 443 if scheme == "https" else 80
        return host, port or default_port, target, scheme == "https"

    @staticmethod
    def _read_body(
        connection: _PinnedConnection,
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


# --- ask_human -----------------------------------------------------------------------------------


class AskHumanTool:
    """Ask an operator a question: the run waits until a human answers, and the answer
    becomes this call's result."""

    name = "ask_human"

    @property
    def descriptor(self) -> ToolDescriptor:
        return ToolDescriptor(
            name=self.name,
            description=(
                "Ask a human operator a question and wait for the answer. Optionally offer choices."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "question": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 2000,
                        "pattern": _NOT_BLANK,
                    },
                    "choices": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": 20,
                        "uniqueItems": True,
                        "items": {"type": "string", "minLength": 1, "maxLength": 200},
                    },
                },
                "required": ["question"],
                "additionalProperties": False,
            },
        )

    def execute(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
        if ctx.resume_input is not None:
            return ToolResult.success(self.name, ctx.resume_input.result)
        question: str = arguments["question"]
        ticket = SuspendTicket(
            Suspension(
                id=f"suspend_{ctx.call_id}",
                action=f"tool:{self.name}",
                message=question,
                parameters=arguments,
            ),
            PendingToolCall(ctx.call_id, self.name, arguments),
            ToolCallResumeMode.USE_DECISION_AS_TOOL_RESULT,
        )
        return ToolResult.pending(self.name, ticket, f"Waiting for a human to answer: {question}")


BUILTIN_TOOLS: tuple[Callable[[], Tool], ...] = (
    AskHumanTool,
    CalculatorTool,
    CurrentTimeTool,
    HttpGetTool,
    SendEmailTool,
    SleepTool,
    WriteNoteTool,
)
