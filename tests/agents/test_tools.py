"""The tool registry and the built-in tools: success and failure paths, schema strictness,
idempotent side effects and the http_get SSRF guard (never touching private networks)."""

from __future__ import annotations

import smtplib
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jsonschema
import pytest
from django.core import mail

from agents.tools import UnknownToolError, get_tool, registry, tool_names
from agents.tools.builtin import mail as builtin_mail
from agents.tools.builtin import notes as builtin_notes
from agents.tools.builtin import web as builtin_web
from agents.tools.registry import ToolRegistry, default_registry
from runs.runtime import netguard
from runs.runtime.ports import CancellationToken, ToolCallContext
from runs.runtime.types import (
    ResumeDecisionAction,
    ToolCallResume,
    ToolCallResumeMode,
    ToolDescriptor,
    ToolResult,
    ToolStatus,
)

BUILTIN_NAMES = [
    "ask_human",
    "calculator",
    "current_time",
    "http_get",
    "send_email",
    "sleep",
    "slow_report",
    "write_note",
]


def make_ctx(
    *,
    run_id: str | None = None,
    call_id: str = "call-1",
    tool_name: str = "x",
    resume_input: ToolCallResume | None = None,
) -> ToolCallContext:
    return ToolCallContext(
        call_id=call_id,
        tool_name=tool_name,
        run_id=run_id or str(uuid.uuid4()),
        thread_id="t",
        agent_id="a",
        cancel=CancellationToken(),
        emit=lambda event: None,
        resume_input=resume_input,
    )


def run_tool(
    name: str, arguments: dict[str, Any], ctx: ToolCallContext | None = None
) -> ToolResult:
    """Validate like the runtime does, then execute."""
    tool = get_tool(name)
    jsonschema.validate(arguments, tool.descriptor.parameters)
    return tool.execute(dict(arguments), ctx or make_ctx(tool_name=name))


def assert_rejected(name: str, arguments: Any) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(arguments, get_tool(name).descriptor.parameters)


# --- registry ------------------------------------------------------------------------------------


class _EchoTool:
    def __init__(self, name: str = "echo") -> None:
        self._name = name

    @property
    def descriptor(self) -> ToolDescriptor:
        return ToolDescriptor(self._name, "Echo.", {"type": "object", "properties": {}})

    def execute(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
        return ToolResult.success(self._name, arguments)


def test_registry_lists_builtin_tool_names_sorted() -> None:
    assert tool_names() == BUILTIN_NAMES
    assert registry.names() == BUILTIN_NAMES


def test_get_tool_returns_the_tool_with_that_name() -> None:
    for name in BUILTIN_NAMES:
        assert get_tool(name).descriptor.name == name


def test_get_unknown_tool_raises_listing_known_names() -> None:
    with pytest.raises(UnknownToolError) as excinfo:
        get_tool("rm_rf")
    message = str(excinfo.value)
    assert "rm_rf" in message
    for name in BUILTIN_NAMES:
        assert name in message
    assert excinfo.value.known == BUILTIN_NAMES


def test_registry_rejects_duplicate_names_unless_replacing() -> None:
    reg = ToolRegistry([_EchoTool()])
    with pytest.raises(ValueError, match="already registered"):
        reg.register(_EchoTool())
    replacement = _EchoTool()
    reg.register(replacement, replace=True)
    assert reg.get("echo") is replacement
    assert len(reg) == 1


def test_registry_descriptors_are_sorted_and_selectable() -> None:
    reg = ToolRegistry([_EchoTool("b"), _EchoTool("a"), _EchoTool("c")])
    assert [d.name for d in reg.descriptors()] == ["a", "b", "c"]
    assert [d.name for d in reg.descriptors(["c", "a"])] == ["a", "c"]
    assert "b" in reg and "z" not in reg
    with pytest.raises(UnknownToolError):
        reg.descriptors(["z"])


def test_default_registry_builds_independent_copies() -> None:
    fresh = default_registry()
    fresh.register(_EchoTool())
    assert "echo" in fresh
    assert "echo" not in registry


@pytest.mark.parametrize("name", BUILTIN_NAMES)
def test_builtin_schemas_are_valid_and_strict(name: str) -> None:
    descriptor = get_tool(name).descriptor
    schema = descriptor.parameters
    jsonschema.Draft202012Validator.check_schema(schema)
    assert descriptor.description
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) <= set(schema["properties"])
    for prop in schema["properties"].values():
        assert "type" in prop
        if prop["type"] == "string":
            assert "maxLength" in prop
        if prop["type"] == "array":
            assert "maxItems" in prop
    assert_rejected(name, {**{key: "x" for key in schema["required"]}, "unexpected": 1})
    assert_rejected(name, [])


# --- calculator ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("2 + 3 * 4", 14),
        ("(2 + 3) * 4", 20),
        ("7 / 2", 3.5),
        ("7 // 2", 3),
        ("7 % 3", 1),
        ("2 ** 10", 1024),
        ("-3 + +5", 2),
        ("sqrt(16) + abs(-2)", 6.0),
        ("round(2.567, 2)", 2.57),
        ("round(2.5)", 2),
        ("min(4, 2, 8) + max(1, 9)", 11),
        ("floor(2.7) + ceil(2.1)", 5),
        ("2 ** 1000", 2**1000),
        ("  1 + 1  ", 2),
    ],
)
def test_calculator_evaluates_arithmetic(expression: str, expected: float) -> None:
    result = run_tool("calculator", {"expression": expression})
    assert result.status is ToolStatus.SUCCESS
    assert result.data == {"expression": expression, "result": expected}


def test_calculator_knows_pi_and_e() -> None:
    result = run_tool("calculator", {"expression": "round(pi * e, 4)"})
    assert result.data["result"] == 8.5397


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("1 / 0", "Division by zero"),
        ("5 // 0", "Division by zero"),
        ("5 % 0", "Division by zero"),
        ("2 +", "Invalid expression"),
        ("2 ** 1001", "Exponents larger than 1000"),
        ("2 ** -1001", "Exponents larger than 1000"),
        ("9 ** 999 ** 2", "Exponents larger than 1000"),
        ("(9 ** 999) ** 999", "too large"),
        ("10.0 ** 400", "too large"),
        ("1e999", "too large"),
        ("(-8) ** 0.5", "not a real number"),
        ("sqrt(-1)", "math domain error"),
        ("2 ^ 3", "use '**'"),
        ("x + 1", "Unknown name 'x'"),
        ("__import__('os').system('true')", "Unsupported function call"),
        ("(1).__class__", "Unsupported syntax: Attribute"),
        ("[1, 2]", "Unsupported syntax: List"),
        ("1 < 2", "Unsupported syntax: Compare"),
        ("lambda: 1", "Unsupported syntax: Lambda"),
        ("'a' * 3", "Unsupported literal"),
        ("True + 1", "Unsupported literal"),
        ("1j", "Unsupported literal"),
        ("~1", "Unsupported operator: Invert"),
        ("1 << 2", "Unsupported operator: LShift"),
        ("abs(1, 2)", "abs() takes 1 argument(s), got 2"),
        ("round(1.5, x=1)", "positional arguments only"),
        ("round(1.5, 0.5)", "whole number of digits"),
        ("max()", "max() takes 1 to 50 argument(s), got 0"),
    ],
)
def test_calculator_reports_errors_clearly(expression: str, message: str) -> None:
    result = run_tool("calculator", {"expression": expression})
    assert result.status is ToolStatus.ERROR
    assert message in (result.message or "")


def test_calculator_refuses_overlong_expression_even_without_schema() -> None:
    tool = get_tool("calculator")
    result = tool.execute({"expression": "1+" * 300 + "1"}, make_ctx())
    assert result.status is ToolStatus.ERROR
    assert "limited to 500 characters" in (result.message or "")


def test_calculator_never_evaluates_code(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("eval/exec must not be used")

    monkeypatch.setattr("builtins.eval", forbidden)
    monkeypatch.setattr("builtins.exec", forbidden)
    assert run_tool("calculator", {"expression": "6 * 7"}).data["result"] == 42


@pytest.mark.parametrize(
    "arguments",
    [{}, {"expression": 42}, {"expression": ""}, {"expression": "1" * 501}, {"expr": "1"}],
)
def test_calculator_schema_rejects_bad_arguments(arguments: dict[str, Any]) -> None:
    assert_rejected("calculator", arguments)


# --- current_time --------------------------------------------------------------------------------


def test_current_time_defaults_to_utc() -> None:
    before = int(time.time())
    result = run_tool("current_time", {})
    assert result.status is ToolStatus.SUCCESS
    assert result.data["timezone"] == "UTC"
    assert before <= result.data["unix"] <= int(time.time()) + 1
    parsed = datetime.fromisoformat(result.data["iso"])
    assert parsed.utcoffset() is not None and parsed.utcoffset().total_seconds() == 0


def test_current_time_uses_the_requested_zone() -> None:
    result = run_tool("current_time", {"timezone": "Asia/Kolkata"})
    assert result.status is ToolStatus.SUCCESS
    assert result.data["timezone"] == "Asia/Kolkata"
    assert result.data["iso"].endswith("+05:30")
    parsed = datetime.fromisoformat(result.data["iso"])
    assert abs(parsed.timestamp() - result.data["unix"]) < 1


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "America", "Etc/../../etc/passwd"])
def test_current_time_rejects_unknown_zone(zone: str) -> None:
    result = get_tool("current_time").execute({"timezone": zone}, make_ctx())
    assert result.status is ToolStatus.ERROR
    assert "Unknown time zone" in (result.message or "")


@pytest.mark.parametrize(
    "arguments",
    [{"timezone": ""}, {"timezone": 5}, {"timezone": "Europe/Paris; rm"}, {"tz": "UTC"}],
)
def test_current_time_schema_rejects_bad_arguments(arguments: dict[str, Any]) -> None:
    assert_rejected("current_time", arguments)


# --- write_note ----------------------------------------------------------------------------------


@pytest.fixture
def run_row(db: None) -> Any:
    from agents.models import Agent, AgentVersion, Model, ModelProvider
    from runs.models import Run, Thread

    provider = ModelProvider.objects.create(slug="scripted", name="Scripted")
    model = Model.objects.create(slug="demo", provider=provider)
    agent = Agent.objects.create(slug="writer", name="Writer", model=model)
    version = AgentVersion.objects.create(agent=agent, number=1, spec={})
    thread = Thread.objects.create()
    return Run.objects.create(thread=thread, agent=agent, agent_version=version)


@pytest.mark.django_db
def test_write_note_creates_a_note_without_a_run_row() -> None:
    from agents.models import Note

    result = run_tool("write_note", {"title": "Groceries", "body": "milk"})
    assert result.status is ToolStatus.SUCCESS
    note = Note.objects.get(pk=result.data["note_id"])
    assert result.data == {"note_id": note.pk, "title": "Groceries"}
    assert (note.title, note.body, note.run, note.tool_call_id) == (
        "Groceries",
        "milk",
        None,
        "call-1",
    )


@pytest.mark.django_db
def test_write_note_tolerates_a_run_id_that_is_not_a_uuid() -> None:
    result = run_tool("write_note", {"title": "T", "body": ""}, make_ctx(run_id="not-a-uuid"))
    assert result.status is ToolStatus.SUCCESS


def test_write_note_links_the_note_to_the_run(run_row: Any) -> None:
    from agents.models import Note

    result = run_tool(
        "write_note", {"title": "Plan", "body": "b"}, make_ctx(run_id=str(run_row.pk))
    )
    note = Note.objects.get(pk=result.data["note_id"])
    assert note.run == run_row
    assert note.tool_call_id == "call-1"


def test_write_note_is_idempotent_per_run_and_tool_call(run_row: Any) -> None:
    from agents.models import Note

    ctx = make_ctx(run_id=str(run_row.pk), call_id="call-7")
    first = run_tool("write_note", {"title": "Once", "body": "first"}, ctx)
    replay = run_tool("write_note", {"title": "Once", "body": "first"}, ctx)
    assert replay.status is ToolStatus.SUCCESS
    assert replay.data == first.data
    assert Note.objects.filter(run=run_row, tool_call_id="call-7").count() == 1


def test_write_note_writes_one_note_per_distinct_tool_call(run_row: Any) -> None:
    from agents.models import Note

    for call_id in ("call-a", "call-b"):
        run_tool(
            "write_note",
            {"title": call_id, "body": ""},
            make_ctx(run_id=str(run_row.pk), call_id=call_id),
        )
    assert Note.objects.filter(run=run_row).count() == 2


def test_write_note_call_id_limit_matches_the_note_model() -> None:
    from agents.models import Note

    field = Note._meta.get_field("tool_call_id")
    assert field.max_length == builtin_notes._NOTE_CALL_ID_MAX_LENGTH


@pytest.mark.django_db
def test_write_note_rejects_blank_title_even_without_schema() -> None:
    result = get_tool("write_note").execute({"title": "   ", "body": ""}, make_ctx())
    assert result.status is ToolStatus.ERROR


@pytest.mark.parametrize(
    "arguments",
    [
        {"title": "t"},
        {"body": "b"},
        {"title": "", "body": "b"},
        {"title": "   ", "body": "b"},
        {"title": "t" * 201, "body": "b"},
        {"title": "t", "body": "b" * 20_001},
        {"title": "t", "body": None},
        {"title": "t", "body": "b", "run_id": "x"},
    ],
)
def test_write_note_schema_rejects_bad_arguments(arguments: dict[str, Any]) -> None:
    assert_rejected("write_note", arguments)


# --- send_email ----------------------------------------------------------------------------------


@pytest.fixture
def locmem_email(settings: Any) -> Any:
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.DEFAULT_FROM_EMAIL = "ops@example.com"
    mail.outbox = []
    return settings


def test_send_email_sends_from_default_from_email(locmem_email: Any) -> None:
    arguments = {"to": ["a@example.com", "b@example.org"], "subject": "Hi", "body": "Hello"}
    result = run_tool("send_email", arguments)
    assert result.status is ToolStatus.SUCCESS
    assert result.data == {"sent": 1, "to": ["a@example.com", "b@example.org"]}
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.from_email == "ops@example.com"
    assert message.to == ["a@example.com", "b@example.org"]
    assert (message.subject, message.body) == ("Hi", "Hello")


def test_send_email_refuses_invalid_addresses_and_sends_nothing(locmem_email: Any) -> None:
    result = run_tool(
        "send_email", {"to": ["ok@example.com", "not-an-email"], "subject": "s", "body": ""}
    )
    assert result.status is ToolStatus.ERROR
    assert "not-an-email" in (result.message or "")
    assert mail.outbox == []


def test_send_email_refuses_multiline_subject_even_without_schema(locmem_email: Any) -> None:
    arguments = {"to": ["a@example.com"], "subject": "Hi\nBcc: x@evil.test", "body": ""}
    result = get_tool("send_email").execute(arguments, make_ctx())
    assert result.status is ToolStatus.ERROR
    assert mail.outbox == []


def test_send_email_reports_backend_failure(
    locmem_email: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing_send_mail(*args: Any, **kwargs: Any) -> int:
        raise smtplib.SMTPServerDisconnected("connection lost")

    monkeypatch.setattr(builtin_mail, "send_mail", failing_send_mail)
    result = run_tool("send_email", {"to": ["a@example.com"], "subject": "s", "body": "b"})
    assert result.status is ToolStatus.ERROR
    assert "connection lost" in (result.message or "")


@pytest.mark.parametrize(
    "arguments",
    [
        {"to": [], "subject": "s", "body": "b"},
        {"to": "a@example.com", "subject": "s", "body": "b"},
        {"to": [f"u{i}@example.com" for i in range(11)], "subject": "s", "body": "b"},
        {"to": ["a@example.com", "a@example.com"], "subject": "s", "body": "b"},
        {"to": ["a@example.com"], "subject": "", "body": "b"},
        {"to": ["a@example.com"], "subject": "s" * 201, "body": "b"},
        {"to": ["a@example.com"], "subject": "a\r\nBcc: x@evil.test", "body": "b"},
        {"to": ["a@example.com"], "subject": "s", "body": "b" * 20_001},
        {"to": ["a@example.com"], "subject": "s"},
        {"to": ["a@example.com"], "subject": "s", "body": "b", "cc": ["c@example.com"]},
    ],
)
def test_send_email_schema_rejects_bad_arguments(arguments: dict[str, Any]) -> None:
    assert_rejected("send_email", arguments)


# --- http_get: the address guard (no traffic) ---------------------------------------------------


def _fake_getaddrinfo(*addresses: str, calls: list[str] | None = None) -> Any:
    def getaddrinfo(host: str, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        if calls is not None:
            calls.append(host)
        infos = []
        for address in addresses:
            if ":" in address:
                infos.append((socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, port, 0, 0)))
            else:
                infos.append((socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port)))
        return infos

    return getaddrinfo


@pytest.fixture
def no_connect(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Fail the test if http_get tries to open any connection."""
    attempts: list[Any] = []

    def open_connection(address: str, port: int, timeout: float) -> Any:
        attempts.append((address, port))
        raise AssertionError(f"http_get must not connect to {address}")

    monkeypatch.setattr(builtin_web, "open_connection", open_connection)
    return attempts


@pytest.fixture
def deny_private(settings: Any) -> Any:
    settings.AWAKEN_HTTP_GET_ALLOW_PRIVATE = False
    return settings


@pytest.mark.parametrize(
    ("address", "label"),
    [
        ("10.0.0.5", "private"),
        ("192.168.1.10", "private"),
        ("172.16.0.1", "private"),
        ("127.0.0.1", "loopback"),
        ("169.254.169.254", "link-local"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:169.254.169.254", "link-local"),
        ("100.64.1.1", "CGNAT"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("::1", "loopback"),
        ("fe80::1", "link-local"),
        ("fd00::1", "private"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("2002:0a00:0005::1", "private"),
        ("64:ff9b::a9fe:a9fe", "link-local"),
    ],
)
def test_http_get_refuses_non_public_address(
    address: str,
    label: str,
    monkeypatch: pytest.MonkeyPatch,
    no_connect: list[Any],
    deny_private: Any,
) -> None:
    monkeypatch.setattr(builtin_web.socket, "getaddrinfo", _fake_getaddrinfo(address))
    result = run_tool("http_get", {"url": "http://innocent.example.com/"})
    assert result.status is ToolStatus.ERROR
    assert "non-public address" in (result.message or "")
    assert label in (result.message or "")
    assert no_connect == []


def test_http_get_refuses_link_local_address(
    monkeypatch: pytest.MonkeyPatch, no_connect: list[Any], deny_private: Any
) -> None:
    monkeypatch.setattr(builtin_web.socket, "getaddrinfo", _fake_getaddrinfo("169.254.169.254"))
    result = run_tool("http_get", {"url": "http://metadata.example.com/latest/meta-data/"})
    assert result.status is ToolStatus.ERROR
    assert "169.254.169.254 is link-local" in (result.message or "")
    assert no_connect == []


def test_http_get_refuses_if_any_resolved_address_is_private(
    monkeypatch: pytest.MonkeyPatch, no_connect: list[Any], deny_private: Any
) -> None:
    monkeypatch.setattr(
        builtin_web.socket, "getaddrinfo", _fake_getaddrinfo("93.184.216.34", "10.0.0.5")
    )
    result = run_tool("http_get", {"url": "https://mixed.example.com/"})
    assert result.status is ToolStatus.ERROR
    assert "10.0.0.5" in (result.message or "")
    assert no_connect == []


def test_http_get_refuses_ip_literal_urls_for_private_ranges(
    no_connect: list[Any], deny_private: Any
) -> None:
    for url in ("http://127.0.0.1:8000/", "http://[::1]/", "http://169.254.169.254/"):
        result = run_tool("http_get", {"url": url})
        assert result.status is ToolStatus.ERROR, url
        assert "non-public address" in (result.message or "")
    assert no_connect == []


@pytest.mark.parametrize(
    "address", ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8"]
)
def test_public_addresses_pass_the_guard(address: str) -> None:
    assert netguard.non_public_reason(address) is None


def test_http_get_reports_unresolvable_host(
    monkeypatch: pytest.MonkeyPatch, no_connect: list[Any]
) -> None:
    def getaddrinfo(*args: Any, **kwargs: Any) -> Any:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(builtin_web.socket, "getaddrinfo", getaddrinfo)
    result = run_tool("http_get", {"url": "http://does-not-exist.invalid/"})
    assert result.status is ToolStatus.ERROR
    assert "could not resolve host" in (result.message or "")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://example.com/file", "Only http and https"),
        ("file:///etc/passwd", "Only http and https"),
        ("http://user:pass@example.com/", "credentials"),
        ("http://example.com:99999/", "Invalid URL"),
    ],
)
def test_http_get_refuses_bad_urls_even_without_schema(
    url: str, message: str, no_connect: list[Any]
) -> None:
    result = get_tool("http_get").execute({"url": url}, make_ctx())
    assert result.status is ToolStatus.ERROR
    assert message in (result.message or "")


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"url": "ftp://example.com/"},
        {"url": "file:///etc/passwd"},
        {"url": "http://exa mple.com/"},
        {"url": "http://example.com/" + "a" * 2048},
        {"url": "https://example.com/", "max_bytes": 0},
        {"url": "https://example.com/", "max_bytes": "100"},
        {"url": "https://example.com/", "max_bytes": 10_000_001},
        {"url": "https://example.com/", "follow_redirects": True},
    ],
)
def test_http_get_schema_rejects_bad_arguments(arguments: dict[str, Any]) -> None:
    assert_rejected("http_get", arguments)


def test_http_get_https_connects_to_vetted_address_with_sni(
    monkeypatch: pytest.MonkeyPatch, deny_private: Any
) -> None:
    """The TLS connection goes to the address that was checked, with the original hostname
    for SNI and certificate verification; nothing leaves the process."""
    monkeypatch.setattr(builtin_web.socket, "getaddrinfo", _fake_getaddrinfo("93.184.216.34"))
    connected: list[Any] = []
    wrapped: list[str | None] = []
    pairs: list[socket.socket] = []

    def open_connection(address: str, port: int, timeout: float) -> socket.socket:
        connected.append((address, port))
        left, right = socket.socketpair()
        pairs.extend([left, right])
        return left

    class FakeContext:
        def wrap_socket(self, sock: socket.socket, server_hostname: str | None = None) -> Any:
            wrapped.append(server_hostname)
            raise ssl.SSLError("certificate verify failed (fake)")

    monkeypatch.setattr(builtin_web, "open_connection", open_connection)
    monkeypatch.setattr(builtin_web, "tls_context", FakeContext)
    result = run_tool("http_get", {"url": "https://www.example.com/page"})
    for sock in pairs:
        sock.close()
    assert result.status is ToolStatus.ERROR
    assert "TLS error" in (result.message or "")
    assert connected == [("93.184.216.34", 443)]
    assert wrapped == ["www.example.com"]


# --- http_get: against a local server ------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    server: _RecordingServer

    def do_GET(self) -> None:
        self.server.requests.append((self.path, self.headers.get("Host")))
        try:
            if self.path == "/hello":
                self._reply(200, b"hello \xc3\xa9t\xc3\xa9", "text/plain; charset=utf-8")
            elif self.path == "/redirect":
                self.send_response(302)
                self.send_header("Location", "/hello")
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif self.path == "/big":
                self._reply(200, b"x" * 5000, "text/plain")
            elif self.path == "/slow":
                time.sleep(1.5)
                self._reply(200, b"late", "text/plain")
            else:
                self._reply(404, b"nope", "text/plain")
        except OSError:
            pass  # the client gave up (timeout tests)

    def _reply(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return None


class _RecordingServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[tuple[str, str | None]] = []


@pytest.fixture
def local_server() -> Iterator[tuple[str, _RecordingServer]]:
    server = _RecordingServer()
    # shutdown() waits for the next poll: 0.5 s by default, at the end of every test
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def allow_private(settings: Any) -> Any:
    settings.AWAKEN_HTTP_GET_ALLOW_PRIVATE = True
    settings.AWAKEN_HTTP_GET_TIMEOUT = 5.0
    settings.AWAKEN_HTTP_GET_MAX_BYTES = 200_000
    return settings


def test_http_get_fetches_from_local_server_when_private_allowed(
    local_server: tuple[str, _RecordingServer], allow_private: Any
) -> None:
    base, server = local_server
    result = run_tool("http_get", {"url": f"{base}/hello"})
    assert result.status is ToolStatus.SUCCESS, result.message
    assert result.data["url"] == f"{base}/hello"
    assert result.data["status"] == 200
    assert result.data["body"] == "hello été"
    assert result.data["truncated"] is False
    assert result.data["headers"]["content-type"] == "text/plain; charset=utf-8"
    assert server.requests == [("/hello", base.removeprefix("http://"))]


def test_http_get_refuses_loopback_by_default(
    local_server: tuple[str, _RecordingServer], deny_private: Any
) -> None:
    base, server = local_server
    result = run_tool("http_get", {"url": f"{base}/hello"})
    assert result.status is ToolStatus.ERROR
    assert "127.0.0.1 is loopback" in (result.message or "")
    assert server.requests == []


def test_http_get_does_not_follow_redirects(
    local_server: tuple[str, _RecordingServer], allow_private: Any
) -> None:
    base, server = local_server
    result = run_tool("http_get", {"url": f"{base}/redirect"})
    assert result.status is ToolStatus.SUCCESS
    assert result.data["status"] == 302
    assert result.data["headers"]["location"] == "/hello"
    assert result.data["body"] == ""
    assert [path for path, _ in server.requests] == ["/redirect"]


def test_http_get_truncates_body_at_max_bytes(
    local_server: tuple[str, _RecordingServer], allow_private: Any
) -> None:
    base, _ = local_server
    result = run_tool("http_get", {"url": f"{base}/big", "max_bytes": 100})
    assert result.data["body"] == "x" * 100
    assert result.data["truncated"] is True


def test_http_get_body_cap_is_bounded_by_setting(
    local_server: tuple[str, _RecordingServer], allow_private: Any
) -> None:
    allow_private.AWAKEN_HTTP_GET_MAX_BYTES = 50
    base, _ = local_server
    result = run_tool("http_get", {"url": f"{base}/big", "max_bytes": 4000})
    assert len(result.data["body"]) == 50
    assert result.data["truncated"] is True


def test_http_get_returns_error_statuses_as_data(
    local_server: tuple[str, _RecordingServer], allow_private: Any
) -> None:
    base, _ = local_server
    result = run_tool("http_get", {"url": f"{base}/missing?q=1"})
    assert result.status is ToolStatus.SUCCESS
    assert result.data["status"] == 404
    assert result.data["body"] == "nope"


def test_http_get_pins_the_vetted_address_and_keeps_the_host_header(
    local_server: tuple[str, _RecordingServer],
    allow_private: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The hostname is resolved once; the connection goes to that address, not a re-lookup."""
    _, server = local_server
    port = server.server_address[1]
    calls: list[str] = []
    monkeypatch.setattr(
        builtin_web.socket, "getaddrinfo", _fake_getaddrinfo("127.0.0.1", calls=calls)
    )
    result = run_tool("http_get", {"url": f"http://service.example.test:{port}/hello"})
    assert result.status is ToolStatus.SUCCESS, result.message
    assert calls == ["service.example.test"]
    assert server.requests == [("/hello", f"service.example.test:{port}")]


def test_http_get_times_out(local_server: tuple[str, _RecordingServer], allow_private: Any) -> None:
    allow_private.AWAKEN_HTTP_GET_TIMEOUT = 0.3
    base, _ = local_server
    started = time.monotonic()
    result = run_tool("http_get", {"url": f"{base}/slow"})
    assert result.status is ToolStatus.ERROR
    assert "Timed out" in (result.message or "")
    assert time.monotonic() - started < 1.4


def test_http_get_reports_connection_refused(allow_private: Any) -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens on this port now
    result = run_tool("http_get", {"url": f"http://127.0.0.1:{port}/"})
    assert result.status is ToolStatus.ERROR
    assert "Could not fetch" in (result.message or "")


# --- ask_human -----------------------------------------------------------------------------------


def test_ask_human_always_suspends_with_a_ticket() -> None:
    arguments = {"question": "Ship it?", "choices": ["yes", "no"]}
    result = run_tool("ask_human", arguments, make_ctx(call_id="call-9"))
    assert result.status is ToolStatus.PENDING
    assert result.message == "Waiting for a human to answer: Ship it?"
    ticket = result.suspension
    assert ticket is not None
    assert ticket.suspension.id == "suspend_call-9"
    assert ticket.suspension.action == "tool:ask_human"
    assert ticket.suspension.message == "Ship it?"
    assert ticket.suspension.parameters == arguments
    assert (ticket.pending.id, ticket.pending.name, ticket.pending.arguments) == (
        "call-9",
        "ask_human",
        arguments,
    )
    assert ticket.resume_mode is ToolCallResumeMode.USE_DECISION_AS_TOOL_RESULT


def test_ask_human_returns_the_answer_when_resumed() -> None:
    resume = ToolCallResume("d-1", ResumeDecisionAction.RESUME, result={"answer": "yes"})
    result = run_tool("ask_human", {"question": "Ship it?"}, make_ctx(resume_input=resume))
    assert result.status is ToolStatus.SUCCESS
    assert result.data == {"answer": "yes"}


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"question": ""},
        {"question": "   "},
        {"question": "q" * 2001},
        {"question": "q", "choices": []},
        {"question": "q", "choices": [1, 2]},
        {"question": "q", "choices": "yes"},
        {"question": "q", "choices": ["a", "a"]},
        {"question": "q", "choices": [str(i) for i in range(21)]},
        {"question": "q", "urgent": True},
    ],
)
def test_ask_human_schema_rejects_bad_arguments(arguments: dict[str, Any]) -> None:
    assert_rejected("ask_human", arguments)


def test_sleep_waits_and_gives_way_to_cancellation() -> None:
    tool = get_tool("sleep")
    token = CancellationToken()
    result = tool.execute({"seconds": 0.05}, _ctx_with(token))
    assert result.status == ToolStatus.SUCCESS and result.data == {"slept_seconds": 0.05}
    threading.Timer(0.1, token.cancel).start()
    started = time.monotonic()
    result = tool.execute({"seconds": 30}, _ctx_with(token))
    assert result.status == ToolStatus.ERROR and "cancelled" in (result.message or "")
    assert time.monotonic() - started < 1


def _ctx_with(token: CancellationToken) -> ToolCallContext:
    return ToolCallContext(
        call_id="call-1",
        tool_name="sleep",
        run_id=str(uuid.uuid4()),
        thread_id="t",
        agent_id="a",
        cancel=token,
        emit=lambda event: None,
    )
