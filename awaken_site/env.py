"""Typed readers for environment variables that fail loudly on bad values.

The values are parsed by django-environ (`environ.Env.parse_value`, the casts behind
`env.bool`, `env.int`, `env.float` and `env.list`); what this module adds is what
django-environ leaves out: lower bounds, a blank value meaning "the default" for numbers,
an `ImproperlyConfigured` that names the variable when a value cannot be read (where
django-environ would read `maybe` as false), and no `$NAME` proxying: `environ.Env()`
reads a value starting with `$` as the name of another variable, which would turn a
secret such as `SECRET_KEY=$x…` into another variable's value, so the raw value is taken
from `os.environ` and handed to django-environ's parser as it is."""

from __future__ import annotations

import ipaddress
import json
import os
import re
from typing import Any

import environ
from django.core.exceptions import ImproperlyConfigured

# what django-environ reads as true (`Env.BOOLEAN_TRUE_STRINGS`, and any non-zero integer),
# and the words taken as false; anything else is refused
_TRUE = frozenset(environ.Env.BOOLEAN_TRUE_STRINGS)
_FALSE = frozenset({"false", "off", "no", "n", ""})
_INTEGER = re.compile(r"[+-]?\d+")
# django-environ's float cast drops every character that is not a digit, `,` , `.` or `-`
# and reads the last `,` or `.` as the decimal point (`1,5` and `1.000,5` in any locale):
# plain decimals only, or `5s` would read as 5, `1e3` as 13 and `1,000` as 1.
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)")


def _raw(name: str) -> str | None:
    return os.environ.get(name)


def _parse(name: str, raw: str, cast: Any, kind: str) -> Any:
    try:
        return environ.Env.parse_value(raw.strip(), cast)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be {kind}, got {raw!r}") from exc


def _at_least(name: str, value: Any, minimum: float | None) -> Any:
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be >= {minimum}, got {value}")
    return value


def env_str(name: str, default: str = "") -> str:
    raw = _raw(name)
    return default if raw is None else str(environ.Env.parse_value(raw, str))


def _is_boolean(raw: str) -> bool:
    value = raw.strip().lower()
    return value in _TRUE or value in _FALSE or _INTEGER.fullmatch(value) is not None


def env_bool(name: str, default: bool) -> bool:
    raw = _raw(name)
    if raw is None:
        return default
    if not _is_boolean(raw):
        raise ImproperlyConfigured(f"{name} must be a boolean (true/false), got {raw!r}")
    return bool(_parse(name, raw, bool, "a boolean (true/false)"))


def env_bool_or_networks(name: str) -> bool | list[str]:
    """false (unset), true, or a comma-separated list of IP addresses and networks
    (`127.0.0.1,10.0.0.0/8,::1`), each checked here."""
    raw = _raw(name)
    if raw is None:
        return False
    if _is_boolean(raw):
        return env_bool(name, False)
    networks = env_list(name, [])
    for item in networks:
        try:
            ipaddress.ip_network(item)
        except ValueError as exc:
            raise ImproperlyConfigured(
                f"{name} must be true, false or a comma-separated list of IP addresses and "
                f"networks (e.g. 127.0.0.1,10.0.0.0/8); {item!r} is none of these: {exc}"
            ) from None
    return networks


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = _raw(name)
    if raw is None or raw.strip() == "":
        return default
    return int(_at_least(name, _parse(name, raw, int, "an integer"), minimum))


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    raw = _raw(name)
    if raw is None or raw.strip() == "":
        return default
    if _NUMBER.fullmatch(raw.strip()) is None:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}")
    return float(_at_least(name, _parse(name, raw, float, "a number"), minimum))


def env_list(name: str, default: list[str]) -> list[str]:
    """Comma-separated; items are stripped and empty ones dropped."""
    raw = _raw(name)
    if raw is None:
        return default
    return [item for item in environ.Env.parse_value(raw, [str.strip]) if item]


def env_argv_map(name: str, default: dict[str, list[str]]) -> dict[str, list[str]]:
    """A JSON object of names to command lines (non-empty lists of strings), e.g.
    `{"files": ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv"]}`."""
    raw = _raw(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be a JSON object: {exc}") from None
    if not isinstance(value, dict) or not all(
        isinstance(argv, list) and argv and all(isinstance(part, str) for part in argv)
        for argv in value.values()
    ):
        raise ImproperlyConfigured(
            f"{name} must map names to command lines, lists of strings such as "
            '["python", "server.py"]'
        )
    return {str(key): list(argv) for key, argv in value.items()}
