"""The SSRF guard shared by everything that connects to an address an admin or a model
chose (the `http_get` tool, remote A2A endpoints): resolve the host, refuse non-public
addresses unless allowed, and connect only to the addresses that were vetted."""

from __future__ import annotations

import ipaddress
import socket

_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class AddressRefusedError(Exception):
    """A host resolved to an address the guard refuses (or to nothing)."""


def non_public_reason(address: str) -> str | None:
    """Why `address` must not be fetched from (private, loopback, …), or None if it is public."""
    ip: IPAddress = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        embedded: ipaddress.IPv4Address | None = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            reason = non_public_reason(str(embedded))
            if reason is not None:
                return f"{reason} (embedded in {ip})"
            if ip.ipv4_mapped is not None:
                return None  # a mapped public IPv4 address is that public address
    checks = [
        ("unspecified", ip.is_unspecified),
        ("loopback", ip.is_loopback),
        ("link-local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("reserved", ip.is_reserved),
        ("shared (CGNAT)", isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT),
        ("private", ip.is_private),
        ("not globally routable", not ip.is_global),
    ]
    for label, matched in checks:
        if matched:
            return f"{ip} is {label}"
    return None


def resolve_host(host: str, port: int) -> list[str]:
    """Every address `host` resolves to, in resolver order, without duplicates."""
    addresses: list[str] = []
    for family, _type, _proto, _name, sockaddr in socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM
    ):
        if family not in (socket.AF_INET, socket.AF_INET6):
            continue
        address = str(sockaddr[0])
        if address not in addresses:
            addresses.append(address)
    return addresses


def vetted_addresses(host: str, port: int, *, allow_private: bool) -> list[str]:
    """The addresses of `host` it is safe to connect to; AddressRefusedError if any of them
    is non-public (a name mixing public and private addresses is refused as a whole)."""
    try:
        addresses = resolve_host(host, port)
    except (OSError, UnicodeError) as exc:
        raise AddressRefusedError(f"could not resolve host '{host}': {exc}") from None
    if not addresses:
        raise AddressRefusedError(f"host '{host}' has no IPv4 or IPv6 address")
    if not allow_private:
        for address in addresses:
            reason = non_public_reason(address)
            if reason is not None:
                raise AddressRefusedError(
                    f"host '{host}' resolves to a non-public address ({reason})"
                )
    return addresses
