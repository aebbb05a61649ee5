"""The HTTP client of the `openai` model client, through the SSRF guard
(runs.runtime.netguard): each connection resolves the host itself, refuses non-public
addresses the policy does not allow, and connects to the vetted address, so the name is
never resolved again between the check and the connection (no DNS rebinding); TLS still
checks the certificate against the host name. Environment proxies are not used: a proxy
would connect to an address nobody vetted.

The `openai` SDK talks through httpx2 (and httpcore2): the transport is theirs. Imported
only with the `openai` client (agents.providers.openai_client_class).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

import httpcore2
import httpx2

from runs.runtime.netguard import AddressPolicy, AddressRefusedError

# the SDK's own defaults (openai._constants), which a custom transport would otherwise lose
MAX_CONNECTIONS = 1000
MAX_KEEPALIVE_CONNECTIONS = 100


class _GuardedNetwork(httpcore2.NetworkBackend):
    def __init__(self, policy: AddressPolicy) -> None:
        self.policy = policy
        self._inner = httpcore2.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.NetworkStream:
        try:
            addresses = self.policy.vet(host, port)
        except AddressRefusedError as exc:
            # a connection error to the SDK (which gives up on it like on any other)
            raise httpcore2.ConnectError(f"refused by the address guard: {exc}") from exc
        last_error: Exception | None = None
        for address in addresses:
            try:
                return self._inner.connect_tcp(
                    address,
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                last_error = exc
        assert last_error is not None
        raise last_error

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.NetworkStream:
        raise httpcore2.ConnectError("unix sockets are not allowed for model providers")


class _AsyncGuardedNetwork(httpcore2.AsyncNetworkBackend):
    """The same guard for the async transport; the name is resolved on a helper thread
    (a slow resolver must not stall the loop every call in flight shares)."""

    def __init__(self, policy: AddressPolicy) -> None:
        self.policy = policy
        self._inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        try:
            addresses = await asyncio.to_thread(self.policy.vet, host, port)
        except AddressRefusedError as exc:
            raise httpcore2.ConnectError(f"refused by the address guard: {exc}") from exc
        last_error: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    address,
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                last_error = exc
        assert last_error is not None
        raise last_error

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.AsyncNetworkStream:
        raise httpcore2.ConnectError("unix sockets are not allowed for model providers")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class GuardedTransport(httpx2.HTTPTransport):
    """httpx2's transport with the guarded network backend and no proxy."""

    def __init__(self, policy: AddressPolicy) -> None:
        super().__init__(trust_env=False)
        self._pool = httpcore2.ConnectionPool(
            # SSL_CERT_FILE / SSL_CERT_DIR still apply (a private CA); proxies do not
            ssl_context=httpx2.create_ssl_context(trust_env=True),
            max_connections=MAX_CONNECTIONS,
            max_keepalive_connections=MAX_KEEPALIVE_CONNECTIONS,
            network_backend=_GuardedNetwork(policy),
        )


class AsyncGuardedTransport(httpx2.AsyncHTTPTransport):
    """The async transport with the guarded network backend and no proxy."""

    def __init__(self, policy: AddressPolicy) -> None:
        super().__init__(trust_env=False)
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=httpx2.create_ssl_context(trust_env=True),
            max_connections=MAX_CONNECTIONS,
            max_keepalive_connections=MAX_KEEPALIVE_CONNECTIONS,
            network_backend=_AsyncGuardedNetwork(policy),
        )


def guarded_async_http_client(policy: AddressPolicy, timeout: Any) -> httpx2.AsyncClient:
    """The async client the process's awaited model calls share (runs.runtime.aio)."""
    return httpx2.AsyncClient(
        transport=AsyncGuardedTransport(policy),
        timeout=timeout,
        follow_redirects=True,
        trust_env=False,
    )


def guarded_http_client(policy: AddressPolicy, timeout: Any) -> httpx2.Client:
    """An HTTP client for the `openai` SDK whose every connection goes through the guard."""
    return httpx2.Client(
        transport=GuardedTransport(policy),
        timeout=timeout,
        follow_redirects=True,  # as the SDK's own client: each hop's connection is vetted
        trust_env=False,
    )
