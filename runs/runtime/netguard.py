"""The SSRF guard shared by everything that connects to an address an admin or a model
chose (the `http_get` tool, remote A2A endpoints, notification webhooks, model
providers): resolve the host, refuse non-public addresses unless allowed, and connect only
to the addresses that were vetted.

Non-public addresses are allowed wholesale (`allow_private`) or only inside named networks
(`allowed_networks`, e.g. 127.0.0.1/32 for a model server on this machine)."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class AddressRefusedError(Exception):
    """A host resolved to an address the guard refuses (or to nothing)."""


class UnresolvedHostError(AddressRefusedError):
    """A host that resolves to nothing here (an unknown name, a resolver failure): there is
    no address to connect to, private or public. A save-time check may accept it (the
    name may resolve where and when it is used); a connection is refused all the same."""


def _embedded_ipv4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address inside an IPv6 one (mapped, 6to4 or NAT64), or None."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return None
    embedded: ipaddress.IPv4Address | None = ip.ipv4_mapped or ip.sixtofour
    if embedded is None and ip in _NAT64:
        embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return embedded


def parse_networks(values: Iterable[str]) -> tuple[IPNetwork, ...]:
    """Addresses and networks (`127.0.0.1`, `10.0.0.0/8`, `::1`, `fd00::/8`) as networks;
    ValueError naming the first entry that is neither (host bits set are refused: a
    network is written by its first address)."""
    networks: list[IPNetwork] = []
    for value in values:
        text = str(value).strip()
        try:
            networks.append(ipaddress.ip_network(text))
        except ValueError as exc:
            raise ValueError(f"{text!r} is not an IP address or network ({exc})") from None
    return tuple(networks)


def in_networks(address: str, networks: Sequence[IPNetwork]) -> bool:
    """Whether `address` lies in one of `networks`; an IPv4-mapped IPv6 address
    (::ffff:a.b.c.d, the same host) also as its IPv4 address. 6to4 and NAT64 addresses are
    not: they reach their IPv4 address through a gateway, not on this network."""
    ip: IPAddress = ipaddress.ip_address(address.split("%", 1)[0])
    candidates: list[IPAddress] = [ip]
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        candidates.append(ip.ipv4_mapped)
    return any(
        candidate in network
        for candidate in candidates
        for network in networks
        if candidate.version == network.version
    )


def non_public_reason(address: str) -> str | None:
    """Why `address` must not be fetched from (private, loopback, …), or None if it is public."""
    ip: IPAddress = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
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


def vetted_addresses(
    host: str,
    port: int,
    *,
    allow_private: bool,
    allowed_networks: Sequence[IPNetwork] = (),
) -> list[str]:
    """The addresses of `host` it is safe to connect to; AddressRefusedError if any of them
    is non-public (a name mixing public and private addresses is refused as a whole),
    unless `allow_private`, or the address lies in one of `allowed_networks`."""
    try:
        addresses = resolve_host(host, port)
    except (OSError, UnicodeError) as exc:
        raise UnresolvedHostError(f"could not resolve host '{host}': {exc}") from None
    if not addresses:
        raise UnresolvedHostError(f"host '{host}' has no IPv4 or IPv6 address")
    if not allow_private:
        for address in addresses:
            reason = non_public_reason(address)
            if reason is not None and not in_networks(address, allowed_networks):
                raise AddressRefusedError(
                    f"host '{host}' resolves to a non-public address ({reason})"
                )
    return addresses


@dataclass(frozen=True)
class AddressPolicy:
    """Which non-public addresses a kind of connection may reach: none (the default),
    every one (`allow_private`), or those in `allowed_networks`."""

    allow_private: bool = False
    allowed_networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def from_setting(cls, value: bool | str | Iterable[str] | None) -> AddressPolicy:
        """From a setting that is a boolean or a list of addresses and networks (a string
        is one comma-separated list). ValueError names an entry that is neither."""
        if value is None or isinstance(value, bool):
            return cls(allow_private=bool(value))
        items = value.split(",") if isinstance(value, str) else list(value)
        return cls(allowed_networks=parse_networks(i for i in items if str(i).strip()))

    def vet(self, host: str, port: int) -> list[str]:
        """vetted_addresses under this policy."""
        return vetted_addresses(
            host,
            port,
            allow_private=self.allow_private,
            allowed_networks=self.allowed_networks,
        )
