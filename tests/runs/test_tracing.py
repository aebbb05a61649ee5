"""OpenTelemetry traces (runs.tracing, docs/tracing.md): off unless OTEL_* ask; one
trace per activation with step, inference, tool and checkpoint spans; the context of the
request that resumed a run reaches its worker through the task's headers; the real
OTLP/HTTP exporter delivers them to a receiver."""

from __future__ import annotations

import http.server
import os
import threading
from typing import Any

import pytest
from celery.signals import task_postrun
from django.core.exceptions import MiddlewareNotUsed
from django.http import HttpResponse
from django.test import RequestFactory
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from awaken_site.celery import return_database_connections
from common.audit import Actor
from runs import tracing
from runs.models import Run, Ticket, ToolCall
from runs.runtime.backends import LocalBackend
from runs.services.submission_flow import run_start
from runs.services.tickets import decision_submit
from runs.tasks import advance_run
from tests.factories import APPROVAL, call, note_call, scripted_agent
from tests.runs.helpers import drive, events

pytestmark = pytest.mark.django_db

OTEL_VARIABLES = (
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_TRACES_SAMPLER",
)


@pytest.fixture
def no_otel_environment(monkeypatch):
    for name in OTEL_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def provider_swap():
    """Restores this process's tracing state (never the global provider) after a test."""
    saved = tracing.use_provider(None)
    yield
    tracing.restore(saved)


@pytest.fixture
def exported(provider_swap):
    """Spans go to an in-memory exporter as each one ends."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use_provider(provider)
    yield exporter
    provider.shutdown()


def named(spans: Any, name: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name == name]


def by_prefix(spans: Any, prefix: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name.startswith(prefix)]


def test_a_run_is_one_trace_of_its_steps_inference_tool_calls_and_checkpoints(exported):
    agent = scripted_agent(
        [{"text": "", "tool_calls": [call("calculator", {"expression": "6*7"})]}, {"text": "42"}]
    )
    run = drive(run_start(agent=agent, messages="what is six times seven"))
    assert (run.status, run.status_reason) == ("done", "natural")
    spans = exported.get_finished_spans()

    [activation] = named(spans, "run.activation")
    assert dict(activation.attributes or {}) == {
        "awaken.run_id": str(run.pk),
        "awaken.thread_id": str(run.thread_id),
        "awaken.agent": agent.slug,
        "awaken.agent_version": 1,
        "awaken.attempt": 1,
        "awaken.outcome": "completed",
    }
    trace_id = activation.context.trace_id
    assert activation.parent is None  # driven outside a task: a trace of its own
    assert {span.context.trace_id for span in spans} == {trace_id}

    steps = named(spans, "run.step")
    assert len(steps) == 2 == run.steps
    assert {step.parent.span_id for step in steps} == {activation.context.span_id}
    step_ids = {step.context.span_id for step in steps}

    model = events(run, "inference_complete")[0]["model"]
    chats = named(spans, f"chat {model}")
    assert len(chats) == 2
    assert {chat.parent.span_id for chat in chats} == step_ids
    for chat in chats:
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.request.model"] == model
        assert chat.start_time <= chat.end_time
    assert sum(chat.attributes["gen_ai.usage.input_tokens"] for chat in chats) == run.input_tokens
    assert sum(chat.attributes["gen_ai.usage.output_tokens"] for chat in chats) == run.output_tokens
    assert run.input_tokens > 0 and run.output_tokens > 0

    [tool] = named(spans, "tool calculator")
    row = ToolCall.objects.get(run=run)
    assert tool.attributes["gen_ai.tool.name"] == "calculator"
    assert tool.attributes["gen_ai.tool.call.id"] == row.call_id
    assert tool.attributes["awaken.tool.outcome"] == "succeeded"
    assert tool.status.status_code is StatusCode.UNSET
    assert tool.parent.span_id in step_ids

    checkpoints = named(spans, "checkpoint")
    assert len(checkpoints) == run.steps  # one per step, written once the step ended
    assert {span.parent.span_id for span in checkpoints} == {activation.context.span_id}
    # every child lies within the activation
    for span in spans:
        assert activation.start_time <= span.start_time <= span.end_time <= activation.end_time


def test_a_failed_tool_call_is_an_error_span(exported):
    agent = scripted_agent([{"text": "", "tool_calls": [call("no_such_tool", {})]}, {"text": "no"}])
    drive(run_start(agent=agent, messages="go"))
    [tool] = named(exported.get_finished_spans(), "tool no_such_tool")
    assert tool.attributes["awaken.tool.outcome"] == "failed"
    assert tool.status.status_code is StatusCode.ERROR


def test_an_activation_that_crashed_is_an_error_span(exported, monkeypatch):
    def crash(self, request):
        raise RuntimeError("boom")

    monkeypatch.setattr(LocalBackend, "execute_root", crash)
    run = drive(run_start(agent=scripted_agent([{"text": "hi"}]), messages="hello"))
    assert run.status_reason == "error"
    [activation] = named(exported.get_finished_spans(), "run.activation")
    assert activation.attributes["awaken.outcome"] == "failed"
    assert activation.status.status_code is StatusCode.ERROR


def test_a_decision_made_in_a_request_span_is_the_parent_of_the_resumed_activation(
    exported, monkeypatch, django_capture_on_commit_callbacks
):
    agent = scripted_agent(
        [{"text": "noting", "tool_calls": [note_call("lunch")]}, {"text": "all done"}],
        permission=APPROVAL,
    )
    run = drive(run_start(agent=agent, messages="write it down"))
    assert run.status == Run.Status.WAITING
    [first] = named(exported.get_finished_spans(), "run.activation")
    [suspended] = named(exported.get_finished_spans(), "tool write_note")
    assert suspended.attributes["awaken.tool.outcome"] == "suspended"
    exported.clear()

    sent: list[tuple[Any, dict[str, Any]]] = []
    monkeypatch.setattr(
        advance_run, "apply_async", lambda args, **options: sent.append((args, options))
    )
    tracer = TracerProvider().get_tracer("test")
    ticket = Ticket.objects.get(run=run, status=Ticket.Status.PENDING)
    with (
        tracer.start_as_current_span("api POST /decisions") as request_span,
        django_capture_on_commit_callbacks(execute=True),
    ):
        decision_submit(ticket=ticket, action="approve", actor=Actor(label="tester"))
    [(args, options)] = sent
    assert set(options["headers"]) >= {"traceparent"}

    # the worker's side: the task as Celery runs it, with the message's headers (its
    # connection hand-back after the task would close the test's database)
    task_postrun.disconnect(return_database_connections)
    try:
        advance_run.apply(args=args, headers=options["headers"])
    finally:
        task_postrun.connect(return_database_connections)
    run.refresh_from_db()
    assert (run.status, run.status_reason) == ("done", "natural")
    [resumed] = named(exported.get_finished_spans(), "run.activation")
    requested = request_span.get_span_context()
    assert resumed.context.trace_id == requested.trace_id != first.context.trace_id
    assert resumed.parent.span_id == requested.span_id
    assert resumed.attributes["awaken.attempt"] == 2
    assert resumed.attributes["awaken.run_id"] == str(run.pk)


def test_a_request_span_continues_the_callers_trace_and_is_carried_to_tasks(exported):
    caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    carried: list[dict[str, str]] = []

    def view(request):
        carried.append(tracing.carrier())
        return HttpResponse("ok", status=201)

    middleware = tracing.TracingMiddleware(view)
    response = middleware(RequestFactory().post("/api/runs", HTTP_TRACEPARENT=caller))
    assert response.status_code == 201
    [span] = exported.get_finished_spans()
    assert span.name == "api POST"
    assert span.kind is trace.SpanKind.SERVER
    assert format(span.context.trace_id, "032x") == "0af7651916cd43dd8448eb211c80319c"
    assert format(span.parent.span_id, "016x") == "b7ad6b7169203331"
    assert span.attributes["http.response.status_code"] == 201
    [headers] = carried
    assert headers["traceparent"].split("-")[1:3] == [
        "0af7651916cd43dd8448eb211c80319c",
        format(span.context.span_id, "016x"),
    ]


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, None),
        ({"OTEL_SERVICE_NAME": "ops"}, None),
        ({"OTEL_TRACES_EXPORTER": "console"}, "console"),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, "otlp"),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"}, None),
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, None),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, "otlp"),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, "otlp"),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, None),
        ({"OTEL_SDK_DISABLED": "false", "OTEL_TRACES_EXPORTER": "console"}, "console"),
    ],
)
def test_which_variables_turn_tracing_on(environ, expected):
    assert tracing.exporter_name(environ) == expected


def test_tracing_is_off_by_default_no_provider_no_spans(
    no_otel_environment, provider_swap, django_capture_on_commit_callbacks
):
    tracing.restore((False, None))  # as a fresh process: read the environment
    assert not tracing.enabled()
    assert tracing.build_provider({}) is None
    assert not isinstance(trace.get_tracer_provider(), TracerProvider)
    with pytest.raises(MiddlewareNotUsed):
        tracing.TracingMiddleware(lambda request: HttpResponse())
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("outside"):
        assert tracing.carrier() == {}
    agent = scripted_agent([{"text": "hi"}])
    with django_capture_on_commit_callbacks(execute=False):
        run = drive(run_start(agent=agent, messages="hello"))
    assert run.status == Run.Status.DONE
    off = tracing.activation_start(run)
    assert off.span is None and off.tracer is None
    assert not isinstance(trace.get_tracer_provider(), TracerProvider)


class _Receiver(http.server.BaseHTTPRequestHandler):
    bodies: list[tuple[str, bytes]]

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.bodies.append((self.path, self.rfile.read(length)))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def receiver():
    bodies: list[tuple[str, bytes]] = []
    handler = type("Receiver", (_Receiver,), {"bodies": bodies})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], bodies
    server.shutdown()
    server.server_close()


def test_the_otlp_http_exporter_delivers_the_spans(
    receiver, no_otel_environment, provider_swap, monkeypatch
):
    port, bodies = receiver
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"http://127.0.0.1:{port}/v1/traces")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    provider = tracing.build_provider(os.environ)
    assert provider is not None
    tracing.use_provider(provider)
    agent = scripted_agent(
        [{"text": "", "tool_calls": [call("calculator", {"expression": "1+1"})]}, {"text": "2"}]
    )
    run = drive(run_start(agent=agent, messages="one plus one"))
    assert provider.force_flush(10_000)
    provider.shutdown()

    assert bodies and {path for path, _ in bodies} == {"/v1/traces"}
    names: list[str] = []
    attributes: dict[str, dict[str, Any]] = {}
    services = set()
    for _, body in bodies:
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            for attribute in resource_spans.resource.attributes:
                if attribute.key == "service.name":
                    services.add(attribute.value.string_value)
            for scope_spans in resource_spans.scope_spans:
                assert scope_spans.scope.name == tracing.SCOPE
                for span in scope_spans.spans:
                    names.append(span.name)
                    attributes[span.name] = {
                        item.key: item.value.string_value or item.value.int_value
                        for item in span.attributes
                    }
    model = events(run, "inference_complete")[0]["model"]
    assert services == {"awaken-ops"}
    assert names.count("run.activation") == 1
    assert names.count("run.step") == 2
    assert names.count(f"chat {model}") == 2
    assert names.count("tool calculator") == 1
    assert "checkpoint" in names
    assert attributes["run.activation"]["awaken.run_id"] == str(run.pk)
    assert attributes["run.activation"]["awaken.agent"] == agent.slug
    assert attributes["tool calculator"]["gen_ai.tool.name"] == "calculator"
    assert attributes[f"chat {model}"]["gen_ai.usage.output_tokens"] > 0
