"""The `openai` model client: any OpenAI-compatible Chat Completions server.

Talks to the server through the official `openai` SDK (streaming, with the SDK's bounded
retries and backoff for rate limits, 5xx and connection failures) and translates its
stream into the runtime's chunks. Every failure becomes a `ModelError` whose message
carries the provider's own words.

The call is awaited with the SDK's async client on the process's one event loop
(runs.runtime.aio): a run waiting on its model holds a coroutine and a socket, not a
thread of its own, and the process's calls share one connection pool. Cancelling the
run cancels the awaited call at once, wherever it is (connecting, waiting for headers, a
retry's backoff, streaming), and closes its connection, so the provider stops too.
A cancelled stream just ends (no error): the loop checks cancellation itself.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import logging
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

import openai

from runs.runtime import aio
from runs.runtime.netguard import AddressPolicy, AddressRefusedError
from runs.runtime.ports import (
    CancellationToken,
    InferenceRequest,
    ModelError,
    StreamChunk,
)

from .guarded_http import guarded_async_http_client, guarded_http_client
from .openai_wire import StreamTranslator, build_messages, convert_tool

logger = logging.getLogger(__name__)

NO_API_KEY = "not-needed"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
ALLOW_PRIVATE_HINT = (
    "allow it with AWAKEN_PROVIDERS_ALLOW_PRIVATE (its addresses or networks, e.g. "
    "127.0.0.1,::1 for a model server on this machine)"
)


def _seconds(value: float) -> str:
    return f"{value:g}"


def _provider_message(exc: openai.APIError) -> str:
    """The provider's own error message: `{"error": {"message": ...}}` (the SDK unwraps
    `error`), a bare `{"message": ...}`, a plain-text body, or the SDK's message."""
    body = exc.body
    if isinstance(body, Mapping):
        message = body.get("message")
        if isinstance(message, str) and message:
            return message
        inner = body.get("error")
        if isinstance(inner, Mapping) and isinstance(inner.get("message"), str):
            return str(inner["message"])
        if isinstance(inner, str) and inner:
            return inner
        if body:
            return json.dumps(body, ensure_ascii=False, default=str)[:500]
    if isinstance(body, str) and body.strip():
        return body.strip()[:500]
    return exc.message


# --- the shared async clients -----------------------------------------------------------------

# httpcore's pool looks through every connection it holds for each request it assigns: one
# pool with hundreds of requests in flight spent more CPU there than on the requests
# (1,000 one-second calls took 26 s instead of 3 s), so runs spread over a few pools.
HTTP_SHARDS = 16
_shard_counter = itertools.count()
_shared_lock = threading.Lock()
_shared_clients: dict[tuple[Any, ...], Any] = {}


def _shared(key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
    """One per process and key (a forked child makes its own)."""
    key = (os.getpid(), *key)
    with _shared_lock:
        client = _shared_clients.get(key)
        if client is None:
            client = _shared_clients[key] = make()
        return client


# --- the client -----------------------------------------------------------------------------


class OpenAIChatClient:
    name = "openai"

    def __init__(
        self,
        model_id: str,
        upstream_model: str,
        base_url: str,
        api_key: str | None,
        timeout: float,
        max_retries: int = 3,
        extra_headers: Mapping[str, str] | None = None,
        on_outcome: Callable[[str | None], None] | None = None,
        address_policy: AddressPolicy | None = None,
    ) -> None:
        """`address_policy`: the non-public addresses the base URL may reach (the SSRF
        guard; none by default: agents.providers passes AWAKEN_PROVIDERS_ALLOW_PRIVATE)."""
        self.model_id = model_id
        self.upstream_model = upstream_model or model_id
        self.base_url = base_url or DEFAULT_BASE_URL
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.extra_headers = dict(extra_headers or {})
        self._secret = api_key or ""
        self._on_outcome = on_outcome
        self.address_policy = address_policy or AddressPolicy()
        timeout_config = openai.Timeout(self.timeout, connect=min(self.timeout, 10.0))
        options: dict[str, Any] = {
            "base_url": self.base_url,
            "api_key": api_key or NO_API_KEY,
            "timeout": timeout_config,
            "max_retries": max_retries,
            "default_headers": self.extra_headers or None,
        }
        # the calls a run waits on, awaited on the process's loop (runs.runtime.aio): one
        # SDK client per configuration and one connection pool per address policy and
        # timeout in the process, so keep-alive connections serve the next run
        shard = next(_shard_counter) % HTTP_SHARDS
        http = _shared(
            ("http", self.address_policy, self.timeout, shard),
            lambda: guarded_async_http_client(self.address_policy, timeout_config),
        )
        headers = tuple(sorted(self.extra_headers.items()))
        self._async_client = _shared(
            ("sdk", self.base_url, self._secret, max_retries, self.timeout, headers, http),
            lambda: openai.AsyncOpenAI(**options, http_client=http),
        )
        self._sync_options = {**options, "http_client_timeout": timeout_config}

    def __repr__(self) -> str:
        return f"OpenAIChatClient(model={self.upstream_model!r}, base_url={self.base_url!r})"

    @functools.cached_property
    def _client(self) -> openai.OpenAI:
        """The blocking client of the admin's checks (list_models), made when first used."""
        options = dict(self._sync_options)
        timeout = options.pop("http_client_timeout")
        return openai.OpenAI(
            **options, http_client=guarded_http_client(self.address_policy, timeout)
        )

    def close(self) -> None:
        """Release the blocking client's connections (the async pool is the process's)."""
        if "_client" in self.__dict__:
            self._client.close()

    def request_params(self, request: InferenceRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.upstream_model,
            "messages": build_messages(request),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            params["tools"] = [convert_tool(tool) for tool in request.tools]
        if request.options:  # provider-specific fields, sent as they are
            params.update(request.options)
        return params

    def stream(self, request: InferenceRequest, cancel: CancellationToken) -> Iterator[StreamChunk]:
        try:
            params = self.request_params(request)
        except Exception as exc:
            raise ModelError(f"cannot build the request for the provider: {exc}") from exc
        return self._observed(self._stream(params, cancel), cancel)

    def vet_address(self) -> None:
        """The SSRF guard before a call: ModelError at once (no SDK retries) when the base
        URL's host resolves to an address the policy refuses. The connection itself is
        vetted again (guarded_http), against the addresses it resolves to then; a host
        that does not resolve now is left to it (and to the SDK's retries)."""
        parts = urlsplit(self.base_url)
        host = parts.hostname or ""
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
            self.address_policy.vet(host.encode("idna").decode("ascii"), port)
        except AddressRefusedError as exc:
            if "non-public" in str(exc):
                raise ModelError(
                    f"refused to call provider at {self.base_url}: {exc}; {ALLOW_PRIVATE_HINT}"
                ) from None
        except (ValueError, UnicodeError) as exc:
            raise ModelError(f"invalid provider base URL {self.base_url}: {exc}") from None

    def list_models(self) -> list[str]:
        """The ids the server's `GET /models` lists (a cheap connection and key check)."""
        try:
            self.vet_address()
            return sorted(str(model.id) for model in self._client.models.list())
        except Exception as exc:
            raise ModelError(self._redact(str(self._model_error(exc, opening=True)))) from None

    def _redact(self, text: str) -> str:
        """Servers may echo the key back in an error; it never leaves this client."""
        return text.replace(self._secret, "[redacted]") if self._secret else text

    def _observed(
        self, chunks: Iterator[StreamChunk], cancel: CancellationToken
    ) -> Iterator[StreamChunk]:
        """Redacts the key from errors and reports each call's outcome (None: it worked)."""
        try:
            yield from chunks
        except ModelError as exc:
            message = self._redact(str(exc))
            self._report(message)
            raise ModelError(message) from None
        if not cancel.is_cancelled():
            self._report(None)

    def _report(self, error: str | None) -> None:
        if self._on_outcome is None:
            return
        try:
            self._on_outcome(error)
        except Exception:  # health bookkeeping must never change the run's outcome
            logger.warning("recording the provider's health failed", exc_info=True)

    def _stream(self, params: dict[str, Any], cancel: CancellationToken) -> Iterator[StreamChunk]:
        if cancel.is_cancelled():
            return
        translator = StreamTranslator()
        try:
            for event in aio.iterate(lambda: self._events(params), cancel):
                try:
                    chunks = translator.feed(event)
                except Exception as exc:
                    raise ModelError(f"malformed stream data from provider: {exc}") from exc
                yield from chunks
        except ModelError:
            raise
        except Exception as exc:
            raise self._model_error(exc, opening=False) from exc
        if cancel.is_cancelled():
            return
        yield from translator.finish()

    async def _events(self, params: dict[str, Any]) -> AsyncIterator[Any]:
        """The SDK's stream events, on the process's loop. Cancelling the task (the run's
        cancellation) closes the connection wherever the call is: connecting, waiting
        for headers, in a retry's backoff or streaming the body."""
        # a slow resolver must not stall the loop every call in flight shares
        await asyncio.to_thread(self.vet_address)
        try:
            # the SDK's request path (retries, backoff, errors), but the body as built and
            # the events as parsed JSON: its per-call type transform of the request and
            # model validation of every chunk were most of a call's CPU
            stream = await self._async_client.post(
                "/chat/completions",
                body=params,
                cast_to=object,
                stream=True,
                stream_cls=openai.AsyncStream[object],
            )
        except Exception as exc:
            raise self._model_error(exc, opening=True) from exc
        try:
            async for event in stream:
                yield event
        except Exception as exc:
            raise self._model_error(exc, opening=False) from exc
        finally:
            await stream.close()

    def _model_error(self, exc: Exception, *, opening: bool) -> ModelError:
        if isinstance(exc, ModelError):
            return exc
        if isinstance(exc, openai.RateLimitError):
            return ModelError(
                f"rate limited by provider after {self.max_retries} retries: {_provider_message(exc)}"
            )
        if isinstance(exc, openai.APIStatusError):
            return ModelError(f"provider error {exc.status_code}: {_provider_message(exc)}")
        if isinstance(exc, openai.APITimeoutError):
            return ModelError(f"provider timed out after {_seconds(self.timeout)}s")
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc.__context__
            detail = f"{cause.__class__.__name__}: {cause}" if cause else exc.message
            if opening:
                return ModelError(f"cannot reach provider at {self.base_url}: {detail}")
            return ModelError(f"lost the connection to provider at {self.base_url}: {detail}")
        if isinstance(exc, openai.APIResponseValidationError):
            return ModelError(f"malformed response from provider: {exc.message}")
        if isinstance(exc, openai.APIError):  # an error event inside the stream
            return ModelError(f"provider error: {_provider_message(exc)}")
        if isinstance(exc, ValueError):  # e.g. a `data:` line that is not JSON
            return ModelError(f"malformed stream data from provider: {exc}")
        if isinstance(exc, openai.OpenAIError):
            return ModelError(f"openai client error: {exc}")
        return ModelError(f"openai client failed: {exc.__class__.__name__}: {exc}")
