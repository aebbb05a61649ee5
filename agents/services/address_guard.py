"""What the SSRF guard (runs.runtime.netguard) says at save time, in one wording for every
form that takes an address an admin chose: remote endpoints (agents.services.endpoints)
and notification webhooks (runs.operations.services.notify_send)."""

from __future__ import annotations

from runs.runtime.netguard import AddressRefusedError, UnresolvedHostError, vetted_addresses


def allow_private_hint(setting: str, targets: str) -> str:
    """How to use a non-public address anyway: `setting` allows it for `targets`."""
    return (
        f"Use a public address, or set {setting}=1 to allow {targets} on "
        "private, loopback or link-local addresses."
    )


def _refusal_text(exc: AddressRefusedError, hint: str) -> str:
    text = str(exc)
    if "non-public" in text:
        return f"Refused: {text}. {hint}"
    return f"Cannot use this host: {text}. Check the spelling and that it resolves here."


def host_address_error(host: str, port: int, *, allow_private: bool, hint: str) -> str | None:
    """Why `host` may not be used (resolved and vetted now), or None; a refused non-public
    address ends with `hint` (see allow_private_hint)."""
    try:
        vetted_addresses(host, port, allow_private=allow_private)
    except AddressRefusedError as exc:
        return _refusal_text(exc, hint)
    return None


def host_address_check(
    host: str, port: int, *, allow_private: bool, hint: str
) -> tuple[str | None, str]:
    """(why `host` may not be used, or None; a warning, or ""): host_address_error, except
    that a host that does not resolve here is only a warning. The guard refuses addresses
    it sees to be non-public; a name that resolves to nothing yet (a record still to come,
    a name only the workers' network knows) is no such address, and every connection to
    it is vetted again when it is made."""
    try:
        vetted_addresses(host, port, allow_private=allow_private)
    except UnresolvedHostError as exc:
        return None, str(exc)
    except AddressRefusedError as exc:
        return _refusal_text(exc, hint), ""
    return None, ""
