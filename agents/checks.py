"""System checks for configuration secrets."""

from __future__ import annotations

from typing import Any

from cryptography.fernet import Fernet
from django.conf import settings
from django.core.checks import Error, Warning


def encryption_keys_check(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """Deploy check (registered by `AgentsConfig.ready`): the keys secrets are encrypted
    with are set, and each is a Fernet key."""
    keys = list(settings.AWAKEN_ENCRYPTION_KEYS)
    if not keys:
        return [
            Warning(
                "AWAKEN_ENCRYPTION_KEYS is not set: provider API keys and endpoint tokens are "
                "encrypted with a key derived from SECRET_KEY, so rotating SECRET_KEY makes "
                "them unreadable.",
                hint="Set AWAKEN_ENCRYPTION_KEYS to a Fernet key (see the README's Settings).",
                id="awaken.W001",
            )
        ]
    errors = []
    for index, key in enumerate(keys, start=1):
        try:
            Fernet(key.encode())
        except ValueError:
            errors.append(
                Error(
                    f"AWAKEN_ENCRYPTION_KEYS: key {index} is not a Fernet key "
                    "(32 url-safe base64-encoded bytes).",
                    id="awaken.E001",
                )
            )
    return errors
