"""Secrets at rest: provider API keys and endpoint tokens are stored Fernet-encrypted with
keys from the environment (AWAKEN_ENCRYPTION_KEYS, newest first; MultiFernet decrypts with
any of them, so keys rotate by prepending a new one)."""

from __future__ import annotations

import base64
import hashlib
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


class SecretError(Exception):
    """A stored secret cannot be decrypted with the configured keys."""


def _derived_key(secret_key: str) -> bytes:
    digest = hashlib.sha256(b"awaken-ops secrets:" + secret_key.encode()).digest()
    return base64.urlsafe_b64encode(digest)


@lru_cache(maxsize=4)
def _fernet(keys: tuple[str, ...], secret_key: str) -> MultiFernet:
    if not keys:
        return MultiFernet([Fernet(_derived_key(secret_key))])
    try:
        return MultiFernet([Fernet(key.encode()) for key in keys])
    except ValueError as exc:
        raise ImproperlyConfigured(
            "AWAKEN_ENCRYPTION_KEYS must hold Fernet keys (32 url-safe base64-encoded bytes); "
            "make one with: python -c 'from cryptography.fernet import Fernet; "
            "print(Fernet.generate_key().decode())'"
        ) from exc


def fernet() -> MultiFernet:
    return _fernet(tuple(settings.AWAKEN_ENCRYPTION_KEYS), settings.SECRET_KEY)


def encrypt(plaintext: str) -> str:
    """Ciphertext for a non-empty secret; "" stays "" (no secret set)."""
    if not plaintext:
        return ""
    return fernet().encrypt(plaintext.encode()).decode()


def decrypt(ciphertext: str) -> str:
    if not ciphertext:
        return ""
    try:
        return fernet().decrypt(ciphertext.encode()).decode()
    except InvalidToken:
        raise SecretError(
            "a stored secret cannot be decrypted with AWAKEN_ENCRYPTION_KEYS "
            "(was the key rotated without keeping the old one?); enter the secret again"
        ) from None
