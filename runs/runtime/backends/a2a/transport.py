"""The HTTP side of the A2A client: connections through the SSRF guard (the vetted address
is pinned, redirects are not followed) and the transport negotiated from the agent card
(the first interface whose binding this client speaks: JSON-RPC or HTTP+JSON)."""

from __future__ import annotations

import asyncio
import functools
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpcore
import httpx
from a2a.types import AgentCard, AgentInterface

from ...netguard import AddressRefusedError, vetted_addresses
from ..base import ExecutionBackendError
from .config import A2A_VERSION, BINDINGS, A2AConfig

# --- transport: the SSRF guard at connect time --------------------------------------------------


class _GuardedNetwork(httpcore.AsyncNetworkBackend):
    """Resolves each host itself, refuses non-public addresses (unless allowed) and connects
    to the vetted address: the name is never resolved again (no DNS rebinding), TLS still
    verifies the certificate against the host name."""

    def __init__(self, allow_private: bool) -> None:
        self.allow_private = allow_private
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        addresses = await loop.run_in_executor(
            None,
            functools.partial(vetted_addresses, host, port, allow_private=self.allow_private),
        )
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
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last_error = exc
        assert last_error is not None
        raise last_error

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.AsyncNetworkStream:
        raise AddressRefusedError("unix sockets are not allowed for remote endpoints")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class _GuardedTransport(httpx.AsyncHTTPTransport):
    def __init__(self, allow_private: bool) -> None:
        super().__init__(trust_env=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            max_connections=10,
            max_keepalive_connections=5,
            network_backend=_GuardedNetwork(allow_private),
        )


def http_client(config: A2AConfig) -> httpx.AsyncClient:
    headers = {"A2A-Version": A2A_VERSION}
    if config.token:
        headers["Authorization"] = f"Bearer {config.token}"
    limit = max(config.timeout_ms / 1000, 0.1)
    return httpx.AsyncClient(
        transport=_GuardedTransport(config.allow_private),
        headers=headers,
        timeout=httpx.Timeout(min(limit, 60.0), connect=min(limit, 10.0)),
        follow_redirects=False,
        trust_env=False,
    )


# --- the transport: negotiated from the agent card ------------------------------------------------


def _interface_url(config: A2AConfig, url: str) -> str | None:
    """An interface's absolute http(s) URL, or None when it has none. A relative URL is read
    against the endpoint's base URL (the spec wants absolute ones; some cards are sloppy)."""
    url = url.strip()
    if not url:
        return None
    absolute = urljoin(f"{config.base_url}/", url)
    parts = urlsplit(absolute)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return absolute


def _offered(card: AgentCard) -> str:
    shown = [
        f"{offer.protocol_binding or 'no binding'} at {offer.url or 'no URL'}"
        for offer in card.supported_interfaces
    ]
    return "; ".join(shown) or "no interfaces"


def _major_minor(version: str) -> list[str]:
    """Major and minor of a protocol version: 1, 1.0 and 1.0.0 are alike (patch versions do
    not matter to negotiation)."""
    return [*version.strip().split("."), "0"][:2]


def _is_current_version(version: str) -> bool:
    return _major_minor(version) == _major_minor(A2A_VERSION)


def choose_interface(card: AgentCard, config: A2AConfig) -> AgentInterface:
    """The interface runs talk to. The card lists its interfaces in its agent's order of
    preference (a protocol 0.3 card's preferredTransport first, then its
    additionalInterfaces), so the first one in a binding this client speaks wins; among
    several of that binding, protocol 1.0 is preferred, as the SDK's client factory does.
    The endpoint's target becomes the interface's tenant."""
    usable: list[AgentInterface] = []
    for offer in card.supported_interfaces:
        if offer.protocol_binding not in BINDINGS:
            continue
        url = _interface_url(config, offer.url)
        if url is None:
            continue
        chosen = AgentInterface()
        chosen.CopyFrom(offer)
        chosen.url = url
        if config.target:
            chosen.tenant = config.target
        usable.append(chosen)
    if not usable:
        raise ExecutionBackendError(
            "remote_error",
            f"A2A endpoint {config.base_url}: the agent card offers no transport this client "
            f"speaks (it offers {_offered(card)}; this client speaks {', '.join(BINDINGS)} "
            "at an http(s) URL)",
        )
    binding = usable[0].protocol_binding
    same = [offer for offer in usable if offer.protocol_binding == binding]
    return next((o for o in same if _is_current_version(o.protocol_version)), same[0])


def describe_interface(interface: AgentInterface) -> str:
    return f"{interface.protocol_binding} at {interface.url}"


def not_served(exc: BaseException) -> bool:
    """Whether a failure means nothing at the URL speaks the binding (404 / 405)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, httpx.HTTPStatusError):
            return current.response.status_code in (404, 405)
        current = current.__cause__ or current.__context__
    return False
