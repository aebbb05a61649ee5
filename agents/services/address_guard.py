"""What the SSRF guard (runs.runtime.netguard) says at save time, in one wording for every
form that takes an address an admin chose: remote endpoints (agents.services.endpoints)
and notification webhooks (runs.services.notify_send)."""

from __future__ import annotations

from runs.runtime.netguard import AddressRefusedError, vetted_addresses


def allow_private_hint(setting: str, targets: str) -> str:
    """How to use a non-public address anyway: `setting` allows it for `targets`."""
    return (
        f"Use a public address, or set {setting}=1 to allow {targets} on "
        "private, loopback or link-local addresses."
    )


def host_address_error(host: str, port: int, *, allow_private: bool, hint: str) -> str | None:
    """Why `host` may not be used (resolved and vetted now), or None; a refused non-public
    address ends with `hint` (see allow_private_hint)."""
    try:
        vetted_addresses(host, port, allow_private=allow_private)
    except AddressRefusedError as exc:
        text = str(exc)
        if "non-public" in text:
            return f"Refused: {text}. {hint}"
        return f"Cannot use this host: {text}. Check the spelling and that it resolves here."
    return None
