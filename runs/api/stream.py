"""Server-Sent Events for a run: `GET /api/v1/runs/{id}/events/stream`.

The durable event log (gap-free per-run seq, committed with the checkpoint it
describes) is the truth; the channel layer says when there is something new. Under ASGI
the stream joins the run's group (through the process's hub, runs/fanout.py), then
reads the log once (everything after the client's seq), and from then on forwards the
frames each commit broadcasts, reading the log again only to fill a gap (a frame that
skips a seq: the layer drops messages for slow consumers and loses them when Redis
restarts; the hub also says when it had to join again) and, as a safety net for a lost
last message, when the run has been quiet for RECHECK_SECONDS. Under WSGI (no event
loop to wait on the layer) it polls the log every POLL_SECONDS.

Each event is one SSE message with `id: <seq>`; a client resumes with `Last-Event-ID`
(or `?after_seq=`) and gets every later event exactly once. Comments keep idle
connections alive. The stream closes after `run_finish` or `error` (unless
`follow=true`, which keeps streaming while the run may resume), when the run is done
and all its events were sent, or after MAX_STREAM_SECONDS (reconnect to go on). An
`error` with code `activation_interrupted` does not close it: the worker running the run
stopped, and the run goes on from its last checkpoint in a new activation.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.core.handlers.asgi import ASGIRequest
from django.core.serializers.json import DjangoJSONEncoder
from django.db import DatabaseError, connection
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from common.api.base import ApiView, get_or_not_found, validated
from common.api.errors import error_responses
from common.errors import InvalidInput, NotFound
from runs import fanout
from runs import permissions as perms
from runs.api.request_serializers import StreamQuerySerializer
from runs.models import Run, RunEvent
from runs.realtime import run_group
from runs.runtime.events import ends_run_stream
from runs.sql import release_connection

logger = logging.getLogger(__name__)

# Module constants so tests (and operators) can shorten them.
HEARTBEAT_SECONDS = 15.0
POLL_SECONDS = 0.3  # WSGI only
# Pushed streams read the log when nothing arrived for this long. The in-memory layer
# of the embedded default only hears this process's runs (a CLI run in another process
# is silent), so it checks more often.
RECHECK_SECONDS = 15.0
RECHECK_SECONDS_IN_MEMORY = 1.0
MAX_STREAM_SECONDS = 30 * 60.0
BATCH = 200
RETRY_MS = 2000


def sse_message(frame: dict[str, Any]) -> bytes:
    data = json.dumps(frame, cls=DjangoJSONEncoder, separators=(",", ":"))
    return f"id: {frame['seq']}\ndata: {data}\n\n".encode()


class EventStream:
    """The state of one stream; `poll()` is one database round: new frames, then whether
    to close."""

    def __init__(self, run_id: Any, after_seq: int, follow: bool) -> None:
        self.run_id = run_id
        self.last_seq = after_seq
        self.follow = follow
        self.done = False
        self.needs_status = False
        self.started = time.monotonic()
        self.last_write = self.started

    def encode(self, frame: dict[str, Any]) -> list[bytes]:
        """What the client receives for one event (a subclass may translate it)."""
        return [sse_message(frame)]

    def poll(self) -> list[bytes]:
        try:
            return self._poll()
        except DatabaseError:
            # a broken connection: drop it and try again at the next poll
            if not connection.in_atomic_block:
                connection.close()
            return []
        finally:
            release_connection()

    def _poll(self) -> list[bytes]:
        chunks: list[bytes] = []
        row = Run.objects.filter(pk=self.run_id).values_list("status", "last_event_seq").first()
        if row is None:
            self.done = True
            return chunks
        status, last_event_seq = row
        while self.last_seq < last_event_seq and not self.done:
            events = list(
                RunEvent.objects.filter(
                    run_id=self.run_id, seq__gt=self.last_seq, seq__lte=last_event_seq
                ).order_by("seq")[:BATCH]
            )
            if not events:
                break
            for event in events:
                chunks.extend(self.encode(event.as_frame()))
                self.last_seq = event.seq
                if not self.follow and ends_run_stream(event.payload):
                    self.done = True
                    break
        if status == Run.Status.DONE and self.last_seq >= last_event_seq:
            self.done = True
        return chunks

    def tick(self, chunks: list[bytes]) -> list[bytes]:
        """After a poll: a heartbeat when nothing was written for a while, and the
        closing comment when the stream ends."""
        now = time.monotonic()
        if chunks:
            self.last_write = now
        elif now - self.last_write >= HEARTBEAT_SECONDS:
            chunks = [b": heartbeat\n\n"]
            self.last_write = now
        if not self.done and now - self.started >= MAX_STREAM_SECONDS:
            self.done = True
            chunks = [*chunks, b": max duration reached; reconnect with Last-Event-ID\n\n"]
        return chunks

    def opening(self) -> bytes:
        return f"retry: {RETRY_MS}\n: stream of run {self.run_id} after seq {self.last_seq}\n\n".encode()

    def __iter__(self) -> Iterator[bytes]:
        """WSGI: a plain generator in the request's thread."""
        try:
            yield self.opening()
            while True:
                chunks = self.tick(self.poll())
                yield from chunks
                if self.done:
                    return
                time.sleep(POLL_SECONDS)
        finally:
            release_connection()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        """ASGI: woken by the channel layer; database reads run in the request's
        thread-sensitive executor. Without a working layer (none configured, Redis
        away) the stream polls the log instead, and the client notices nothing."""
        layer = get_channel_layer()
        inbox = await self._subscribe(layer)
        try:
            yield self.opening()
            if inbox is not None:
                async for chunk in self._pushed(layer, inbox):
                    yield chunk
            if not self.done:
                async for chunk in self._polled():
                    yield chunk
        finally:
            if inbox is not None:
                inbox.close()
            await sync_to_async(release_connection)()

    async def _subscribe(self, layer: Any) -> fanout.Inbox | None:
        """Follow the run's group before the first read, so no commit falls in between.
        The process's hub (runs/fanout.py) is the group's one member for all the streams
        and sockets of the run in this process."""
        if layer is None:
            return None
        inbox = fanout.Inbox(fanout.hub_for(layer), run_group(self.run_id))
        if not await inbox.open():
            logger.warning("run %s: channel layer unavailable; polling", self.run_id)
            return None
        return inbox

    async def _pushed(self, layer: Any, inbox: fanout.Inbox) -> AsyncIterator[bytes]:
        """Forward broadcast frames; read the log on a gap, after a quiet while, and
        when the hub says some may have been lost."""
        recheck = (
            RECHECK_SECONDS_IN_MEMORY
            if isinstance(layer, InMemoryChannelLayer)
            else RECHECK_SECONDS
        )
        poll = sync_to_async(self.poll)
        chunks = await poll()
        while True:
            for chunk in self.tick(chunks):
                yield chunk
            if self.done:
                return
            wait = max(0.0, min(recheck, self.until_heartbeat(), MAX_STREAM_SECONDS - self.age()))
            try:
                frames = await asyncio.wait_for(inbox.get(), wait)
            except TimeoutError:
                chunks = await poll()  # quiet for a while: was a message lost?
                continue
            if frames is None:  # the layer failed meanwhile: the log has what it lost
                chunks = await poll()
            elif not frames:
                chunks = []
            elif self.follows(frames):
                chunks = self.forward(frames)
                if self.needs_status:  # a finish while following: may it resume?
                    chunks += await poll()
            else:  # a gap: the log has what the layer dropped
                chunks = await poll()

    async def _polled(self) -> AsyncIterator[bytes]:
        poll = sync_to_async(self.poll)
        while True:
            for chunk in self.tick(await poll()):
                yield chunk
            if self.done:
                return
            await asyncio.sleep(POLL_SECONDS)

    def age(self) -> float:
        return time.monotonic() - self.started

    def until_heartbeat(self) -> float:
        return HEARTBEAT_SECONDS - (time.monotonic() - self.last_write)

    def follows(self, frames: list[dict[str, Any]]) -> bool:
        """The broadcast frames continue what was sent (or repeat some of it): no gap."""
        return int(frames[0]["seq"]) <= self.last_seq + 1

    def forward(self, frames: list[dict[str, Any]]) -> list[bytes]:
        """The broadcast frames not sent yet, in order, up to a terminal event."""
        chunks: list[bytes] = []
        self.needs_status = False
        for frame in frames:
            seq = int(frame["seq"])
            if seq <= self.last_seq:
                continue
            chunks.extend(self.encode(frame))
            self.last_seq = seq
            if ends_run_stream(frame):
                if not self.follow:
                    self.done = True
                    break
                self.needs_status = True
        return chunks


class EventStreamRenderer(BaseRenderer):
    """Lets clients send `Accept: text/event-stream` (errors are still answered in JSON)."""

    media_type = "text/event-stream"
    format = "sse"
    charset = None

    def render(
        self, data: Any, accepted_media_type: Any = None, renderer_context: Any = None
    ) -> bytes:
        return json.dumps(data, cls=DjangoJSONEncoder).encode()


class SseView(ApiView):
    """A view that may answer with an event stream (`Accept: text/event-stream`); its
    errors and JSON answers stay JSON whatever the client accepts."""

    renderer_classes = [JSONRenderer, EventStreamRenderer]

    def finalize_response(self, request: Any, response: Any, *args: Any, **kwargs: Any) -> Any:
        response = super().finalize_response(request, response, *args, **kwargs)
        if isinstance(response, Response):
            response.accepted_renderer = JSONRenderer()
            response.accepted_media_type = "application/json"
        return response

    @staticmethod
    def wants_stream(request: Request) -> bool:
        return getattr(request, "accepted_media_type", "") == EventStreamRenderer.media_type


def event_stream_response(
    request: Request, run_id: Any, *, after: int, follow: bool, status: int = 200
) -> StreamingHttpResponse:
    """The run's events after seq `after` as Server-Sent Events (see EventStream)."""
    stream = EventStream(run_id, after, follow)
    is_async = isinstance(getattr(request, "_request", request), ASGIRequest)
    response = StreamingHttpResponse(
        stream.__aiter__() if is_async else iter(stream),
        status=status,
        content_type="text/event-stream",
    )
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


class RunEventStreamView(SseView):
    required_perms = {"GET": perms.VIEW}

    @extend_schema(
        operation_id="runs_events_stream",
        summary="A run's events as Server-Sent Events",
        description="`text/event-stream`: one message per event, `id:` = seq, `data:` = the "
        "event JSON (as in /events). Resumes after `Last-Event-ID` (or `after_seq`) with no "
        "gap and no duplicate. Comment lines every 15 s keep the connection open. Closes "
        "after `run_finish` or `error` unless `follow=true` (then it goes on while the run "
        "resumes, until it is done), but not after an `error` with code "
        "`activation_interrupted` (the run goes on from its last checkpoint); also after "
        "30 minutes: reconnect with Last-Event-ID.",
        tags=["events"],
        parameters=[
            OpenApiParameter("run_id", OpenApiTypes.UUID, OpenApiParameter.PATH),
            StreamQuerySerializer,
            OpenApiParameter(
                "Last-Event-ID",
                OpenApiTypes.INT,
                OpenApiParameter.HEADER,
                required=False,
                description="The last seq received; wins over after_seq.",
            ),
        ],
        responses={
            (200, "text/event-stream"): OpenApiResponse(
                OpenApiTypes.STR, description="The event stream."
            ),
            **error_responses(404),
        },
    )
    def get(self, request: Request, run_id: str) -> StreamingHttpResponse:
        query = validated(StreamQuerySerializer, request.query_params)
        run = get_or_not_found(
            Run.objects.select_related("agent").only("pk", "agent__team_id"), "run", run_id
        )
        if not request.user.has_perm("runs.view_run", run):  # another team's: not found
            raise NotFound(f"run {run_id} not found")
        pk = run.pk
        after = query.get("after_seq") or 0
        last_event_id = request.headers.get("Last-Event-ID", "").strip()
        if last_event_id:
            try:
                after = max(0, int(last_event_id))
            except ValueError:
                raise InvalidInput(
                    "Last-Event-ID must be an event seq", {"Last-Event-ID": last_event_id}
                ) from None
        return event_stream_response(request, pk, after=after, follow=query["follow"])
