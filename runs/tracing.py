"""OpenTelemetry traces (docs/tracing.md): off unless the standard OTEL_* variables ask
for them; then one trace per run activation, with spans for its steps, inference, tool
calls and checkpoints, continuing the trace of the API request that started or resumed
the run.

The runtime knows nothing of this: the live sink (runs.store.OrmLiveSink) hands every
event it is given to the activation's `ActivationTrace` as it is emitted, the way it
hands them to the metrics' timer, and the spans are made from those events. Events
arrive when things end (an inference's `inference_complete`, a call's
`tool_call_done`), so those spans get explicit start and end times.

When tracing is off no SDK provider exists: `activation_start` returns a trace that does
nothing, the request middleware removes itself and nothing is carried with tasks.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from celery import current_task
from django.core.exceptions import MiddlewareNotUsed
from django.http import HttpRequest, HttpResponse
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

logger = logging.getLogger(__name__)

SERVICE_NAME = "awaken-ops"
SCOPE = "awaken.runs"
# the keys of the W3C trace context carried with a task (as Celery message headers)
CARRIED = ("traceparent", "tracestate")
# what `run_advance` reports for an activation that went wrong (its span's status: error)
FAILED_OUTCOMES = frozenset({"failed", "timeout", "interrupted", "conflict", "lease_lost"})


# --- configuration ------------------------------------------------------------------------


def exporter_name(environ: Mapping[str, str]) -> str | None:
    """Which exporter the variables ask for: `otlp`, `console`, or None (tracing off).
    OTEL_SDK_DISABLED=true turns it off; otherwise OTEL_TRACES_EXPORTER decides (`none`
    is off); without it, an OTLP endpoint (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
    OTEL_EXPORTER_OTLP_ENDPOINT) means `otlp`, and nothing set means off."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    chosen = environ.get("OTEL_TRACES_EXPORTER", "").split(",")[0].strip().lower()
    if not chosen:
        endpoints = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
        return "otlp" if any(environ.get(name, "").strip() for name in endpoints) else None
    if chosen == "none":
        return None
    if chosen not in ("otlp", "console"):
        logger.warning("tracing: exporter %r is not supported (otlp, console); off", chosen)
        return None
    return chosen


def _otlp_exporter() -> Any:
    """The OTLP/HTTP (protobuf) exporter, configured by the OTEL_EXPORTER_OTLP_* variables
    itself. Loaded only when used: processes that do not trace never load it."""
    module = importlib.import_module("opentelemetry.exporter.otlp.proto.http.trace_exporter")
    return module.OTLPSpanExporter()


def build_provider(environ: Mapping[str, str]) -> TracerProvider | None:
    """A provider exporting in batches as `environ` asks, or None when tracing is off.
    The sampler comes from OTEL_TRACES_SAMPLER (the SDK reads it), the service name from
    OTEL_SERVICE_NAME (default awaken-ops), more resource attributes from
    OTEL_RESOURCE_ATTRIBUTES."""
    name = exporter_name(environ)
    if name is None:
        return None
    service = environ.get("OTEL_SERVICE_NAME", "").strip() or SERVICE_NAME
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    exporter = _otlp_exporter() if name == "otlp" else ConsoleSpanExporter()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


class _State:
    lock = threading.Lock()
    loaded = False
    provider: TracerProvider | None = None
    tracer: trace.Tracer | None = None


def _tracer() -> trace.Tracer | None:
    """This process's tracer, None when tracing is off. The provider is built from the
    environment at the first use (after a prefork worker forked its children: each child
    builds its own, with its own export thread) and made the global one, for libraries
    that trace themselves."""
    if not _State.loaded:
        with _State.lock:
            if not _State.loaded:
                provider = build_provider(os.environ)
                if provider is not None:
                    trace.set_tracer_provider(provider)
                _set(provider)
    return _State.tracer


def _set(provider: TracerProvider | None) -> None:
    _State.provider = provider
    _State.tracer = provider.get_tracer(SCOPE) if provider is not None else None
    _State.loaded = True


def use_provider(provider: TracerProvider | None) -> tuple[bool, TracerProvider | None]:
    """Trace with `provider` from now on (None: off), without touching the global
    provider; returns what was there, for `restore`. For tests and embedders."""
    with _State.lock:
        previous = (_State.loaded, _State.provider)
        _set(provider)
    return previous


def restore(previous: tuple[bool, TracerProvider | None]) -> None:
    with _State.lock:
        _set(previous[1])
        _State.loaded = previous[0]


def enabled() -> bool:
    return _tracer() is not None


def shutdown() -> None:
    """Export what is still buffered (a prefork child exits without running atexit)."""
    if _State.provider is not None:
        _State.provider.force_flush()


# --- propagation ----------------------------------------------------------------------------


def carrier() -> dict[str, str]:
    """The current trace context (W3C traceparent), to send with a task; empty when
    tracing is off or nothing is being traced."""
    if not enabled():
        return {}
    found: dict[str, str] = {}
    propagate.inject(found)
    return {key: value for key, value in found.items() if key in CARRIED}


def task_parent() -> Context | None:
    """The trace context the running Celery task carries (its message's headers), None
    outside a task or when it carries none."""
    task = current_task
    request = getattr(task, "request", None) if task else None
    if request is None:
        return None
    headers = getattr(request, "headers", None) or {}
    found = {key: headers.get(key) or getattr(request, key, None) for key in CARRIED}
    received = {key: str(value) for key, value in found.items() if value}
    return propagate.extract(received) if received else None


class TracingMiddleware:
    """One `api <method> <route>` server span per request, continuing the caller's trace
    when it sends a traceparent; the runs the request starts or resumes carry it to their
    worker. Removes itself when tracing is off."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        if not enabled():
            raise MiddlewareNotUsed
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        tracer = _tracer()
        if tracer is None:
            return self.get_response(request)
        parent = propagate.extract(request.headers)
        method = request.method or "GET"
        with tracer.start_as_current_span(
            f"api {method}", context=parent, kind=SpanKind.SERVER
        ) as span:
            response = self.get_response(request)
            match = getattr(request, "resolver_match", None)
            if match is not None and match.route:
                span.update_name(f"api {method} /{match.route}")
                span.set_attribute("http.route", f"/{match.route}")
            span.set_attribute("http.request.method", method)
            span.set_attribute("http.response.status_code", response.status_code)
            if response.status_code >= 500:
                span.set_status(Status(StatusCode.ERROR))
        return response


# --- one activation -----------------------------------------------------------------------


class ActivationTrace:
    """The spans of one activation of a run on a worker: `run.activation`, its `run.step`
    spans, and under each step its `chat <model>` inference and `tool <name>` calls;
    `checkpoint` spans under the step in progress (or the activation). A trace made
    while tracing is off does nothing."""

    def __init__(self, tracer: trace.Tracer | None, span: Span | None) -> None:
        self.tracer = tracer
        self.span = span
        self.step: Span | None = None
        self.mark: int | None = None  # when the step's last inference or call ended (ns)

    def _parent(self) -> Context:
        return trace.set_span_in_context(self.step or self.span or trace.INVALID_SPAN)

    def observe(self, event: Mapping[str, Any]) -> None:
        if self.tracer is None:
            return
        kind = event["event_type"]
        now = time.time_ns()
        if kind == "step_start":
            self._end_step(now)
            self.step = self.tracer.start_span("run.step", self._parent(), start_time=now)
            self.mark = now
        elif kind == "step_end":
            self._end_step(now)
        elif kind == "inference_complete":
            self._inference(event, now)
        elif kind == "tool_call_done":
            self._tool_call(event, now)

    def _end_step(self, now: int) -> None:
        if self.step is not None:
            self.step.end(end_time=now)
        self.step, self.mark = None, None

    def _inference(self, event: Mapping[str, Any], now: int) -> None:
        assert self.tracer is not None
        model = str(event.get("model") or "unknown")
        start = now - int(float(event.get("duration_ms") or 0) * 1_000_000)
        usage = event.get("usage") or {}
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
            "gen_ai.response.model": model,
        }
        for name, field in (
            ("gen_ai.usage.input_tokens", "prompt_tokens"),
            ("gen_ai.usage.output_tokens", "completion_tokens"),
        ):
            if usage.get(field) is not None:
                attributes[name] = int(usage[field])
        span = self.tracer.start_span(
            f"chat {model}",
            self._parent(),
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=start,
        )
        span.end(end_time=now)
        self.mark = now

    def _tool_call(self, event: Mapping[str, Any], now: int) -> None:
        assert self.tracer is not None
        result = event.get("result") or {}
        name = str(result.get("tool_name") or "unknown")
        outcome = str(event.get("outcome") or "")
        span = self.tracer.start_span(
            f"tool {name}",
            self._parent(),
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": name,
                "gen_ai.tool.call.id": str(event.get("id") or ""),
                "awaken.tool.outcome": outcome,
            },
            start_time=self.mark if self.mark is not None else now,
        )
        if outcome == "failed":
            span.set_status(Status(StatusCode.ERROR, str(result.get("error") or "failed")))
        span.end(end_time=now)
        self.mark = now

    @contextmanager
    def checkpoint(self) -> Iterator[None]:
        """A `checkpoint` span around one checkpoint's transaction."""
        if self.tracer is None:
            yield
            return
        with self.tracer.start_as_current_span("checkpoint", self._parent()):
            yield

    @contextmanager
    def current(self) -> Iterator[None]:
        """The activation's span as the current one (for spans libraries make inside)."""
        if self.span is None:
            yield
            return
        with trace.use_span(self.span, end_on_exit=False):
            yield

    def end(self, outcome: str) -> None:
        """The activation returned (`outcome`: what `run_advance` reports)."""
        if self.span is None:
            return
        now = time.time_ns()
        self._end_step(now)
        kind = outcome.split(":", 1)[0]  # a failed backend's status names its error after
        self.span.set_attribute("awaken.outcome", kind)
        if kind in FAILED_OUTCOMES:
            self.span.set_status(Status(StatusCode.ERROR, outcome))
        self.span.end(end_time=now)
        self.span = None


def activation_start(run: Any, parent: Context | None = None) -> ActivationTrace:
    """The trace of an activation of `run` (claimed, its agent and version loaded),
    beginning now; `parent`: the context the task carries (default: the running task's)."""
    tracer = _tracer()
    if tracer is None:
        return ActivationTrace(None, None)
    version = getattr(run, "agent_version", None)
    span = tracer.start_span(
        "run.activation",
        parent if parent is not None else task_parent(),
        kind=SpanKind.CONSUMER,
        attributes={
            "awaken.run_id": str(run.pk),
            "awaken.thread_id": str(run.thread_id),
            "awaken.agent": str(run.agent.slug),
            "awaken.agent_version": int(getattr(version, "number", 0) or 0),
            "awaken.attempt": int(run.attempt or 0),
        },
    )
    return ActivationTrace(tracer, span)
