"""Remote endpoints: validation that says what to fix, the SSRF guard at save time (the
runtime guards again at connect time), the probe (`endpoint_probe`; audited when an
operator asks, `endpoint_check`), and the runtime A2A backend built from a row (the token
is decrypted only here, at execution time).

The bearer token never leaves this module except inside the runtime config handed to the
backend: not in task arguments, events, run state, logs or error messages.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.utils import timezone

from agents.models import Health, RemoteEndpoint
from agents.secrets import SecretError
from common.audit import Actor, audit_record
from common.teams import ensure_writable
from runs.runtime.backends.a2a import (
    BACKEND,
    A2ABackend,
    A2AConfig,
    A2AConfigError,
    describe_error,
    validate,
)

from .address_guard import allow_private_hint, host_address_check
from .health import endpoint_health_record

logger = logging.getLogger(__name__)

_U32 = 2**32 - 1
ALLOW_PRIVATE_HINT = allow_private_hint("AWAKEN_ENDPOINTS_ALLOW_PRIVATE", "endpoints")


def _allow_private() -> bool:
    return bool(getattr(settings, "AWAKEN_ENDPOINTS_ALLOW_PRIVATE", False))


def endpoint_address_check(base_url: str) -> tuple[str | None, str]:
    """The SSRF guard at save time: (why `base_url`'s host may not be used, or None; a
    warning when it does not resolve here, or "")."""
    parts = urlsplit(base_url)
    host = parts.hostname
    if not host:
        return "The URL has no host.", ""
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        return f"Invalid port: {exc}.", ""
    try:
        host = host.encode("idna").decode("ascii")
    except UnicodeError:
        return f"Invalid host name '{host}'.", ""
    return host_address_check(host, port, allow_private=_allow_private(), hint=ALLOW_PRIVATE_HINT)


def endpoint_address_error(base_url: str) -> str | None:
    """Why `base_url`'s host may not be used now, a host that does not resolve included."""
    error, warning = endpoint_address_check(base_url)
    return error or (f"Unreachable: {warning}." if warning else None)


def endpoint_config_errors(
    endpoint: RemoteEndpoint,
    *,
    token: str | None = None,
    check_address: bool = True,
    warnings: list[str] | None = None,
) -> dict[str, str]:
    """Field -> what to fix, for every invalid part of an endpoint's configuration.

    `token` overrides the stored one (a form about to save a new token); with
    `check_address` the base URL's host is resolved and refused if it is not public
    (unless AWAKEN_ENDPOINTS_ALLOW_PRIVATE). Given `warnings` (a form saving the
    endpoint), a host that does not resolve here is no error: it is saved, with a warning
    added there, so that its health check can report it; the guard checks the address
    again at every connection."""
    errors: dict[str, str] = {}
    if endpoint.backend != BACKEND:
        errors["backend"] = (
            f"Unsupported backend '{endpoint.backend}': only '{BACKEND}' (Agent2Agent) exists."
        )
    base_url_error = _base_url_error(
        (endpoint.base_url or "").strip(), check_address=check_address, warnings=warnings
    )
    if base_url_error:
        errors["base_url"] = base_url_error
    target = endpoint.target or ""
    if target and (
        target != target.strip()
        or "/" in target
        or any(c in target for c in "?#%\\ ")
        or target in (".", "..")
    ):
        errors["target"] = (
            "The target is one URL path segment (a remote agent or tenant id): "
            "no slashes, spaces, '?', '#' or '%'."
        )
    if endpoint.timeout_ms is None or endpoint.timeout_ms < 1:
        errors["timeout_ms"] = "The timeout must be at least 1 ms."
    if endpoint.poll_interval_ms is None or endpoint.poll_interval_ms < 10:
        errors["poll_interval_ms"] = "Poll at most every 10 ms (a value of at least 10)."
    elif endpoint.timeout_ms and endpoint.poll_interval_ms > endpoint.timeout_ms:
        errors["poll_interval_ms"] = (
            f"The poll interval ({endpoint.poll_interval_ms} ms) must not be longer than the "
            f"timeout ({endpoint.timeout_ms} ms)."
        )
    if endpoint.history_length is not None and not 0 <= endpoint.history_length <= _U32:
        errors["history_length"] = f"History length must be between 0 and {_U32}."
    if token is None:
        try:
            token = endpoint.token()
        except SecretError as exc:
            errors["token"] = f"The stored token is unusable: {exc}."
            token = ""
    if not errors:
        try:
            validate(endpoint_mapping(endpoint, token=token), allow_private=_allow_private())
        except A2AConfigError as exc:
            errors["__all__"] = f"{exc}."
    return errors


def _base_url_error(base_url: str, *, check_address: bool, warnings: list[str] | None) -> str:
    """What is wrong with an endpoint's base URL ("" when nothing is); see
    `endpoint_config_errors` for `check_address` and `warnings`."""
    parts = urlsplit(base_url)
    if not base_url:
        return "Enter the remote agent's base URL, e.g. https://agents.example.com/a2a."
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "Use an absolute http:// or https:// URL with a host."
    if parts.username is not None or parts.password is not None:
        return "Remove the user:password part of the URL; put the secret in the bearer token."
    if parts.query or parts.fragment:
        return "Remove the query string and fragment: give the agent's base URL."
    if not check_address:
        return ""
    if warnings is None:
        return endpoint_address_error(base_url) or ""
    problem, warning = endpoint_address_check(base_url)
    if warning and not problem:
        warnings.append(
            f"Base URL: {warning}. Saved; runs and health checks cannot reach it until "
            "the name resolves."
        )
    return problem or ""


def endpoint_mapping(endpoint: RemoteEndpoint, *, token: str | None) -> dict[str, Any]:
    """The endpoint as upstream's RemoteEndpoint JSON (docs/run-model.md)."""
    options: dict[str, Any] = {"poll_interval_ms": endpoint.poll_interval_ms}
    if endpoint.history_length is not None:
        options["history_length"] = endpoint.history_length
    return {
        "backend": endpoint.backend,
        "base_url": endpoint.base_url,
        "auth": {"type": "bearer", "token": token} if token else None,
        "target": endpoint.target or None,
        "timeout_ms": endpoint.timeout_ms,
        "options": options,
    }


def endpoint_config(endpoint: RemoteEndpoint) -> A2AConfig:
    """The runtime config, with the decrypted token (build it at execution time only)."""
    return validate(
        endpoint_mapping(endpoint, token=endpoint.token()), allow_private=_allow_private()
    )


@dataclass(frozen=True)
class HealthResult:
    ok: bool
    card_name: str = ""
    error: str = ""
    card: dict[str, Any] | None = None
    transport: str = ""  # the binding and URL runs use, e.g. "JSONRPC at https://…/rpc"

    @property
    def summary(self) -> str:
        if self.ok:
            return f"healthy: agent card '{self.card_name}' over {self.transport}"
        return f"failing: {self.error}"


def _endpoint_contact(endpoint: RemoteEndpoint) -> HealthResult:
    """Fetch the agent card (a2a-sdk card resolver, through the SSRF guard), choose the
    transport runs would use and make one cheap call over it. A card alone proves little:
    a remote whose card offers no binding this client speaks, or whose interface does not
    answer its binding, fails every run. No database writes."""
    errors = endpoint_config_errors(endpoint)
    if errors:
        field, message = next(iter(errors.items()))
        where = "" if field == "__all__" else f"{field}: "
        return HealthResult(ok=False, error=f"{where}{message}")
    config = endpoint_config(endpoint)
    try:
        checked = A2ABackend(config).check()
    except Exception as exc:
        return HealthResult(ok=False, error=describe_error(config, exc))
    card, transport = checked["card"], checked["transport"]
    return HealthResult(
        ok=True,
        card_name=str(card.get("name") or ""),
        card=card,
        transport=f"{transport['binding']} at {transport['url']}",
    )


def endpoint_probe(endpoint: RemoteEndpoint) -> HealthResult:
    """Contact the endpoint the way runs would and record its health (not audited)."""
    at = timezone.now()
    result = _endpoint_contact(endpoint)
    endpoint_health_record(endpoint_id=endpoint.pk, ok=result.ok, error=result.error, at=at)
    logger.info("endpoint %s health check: %s", endpoint.slug, result.summary)
    return result


def endpoint_check(*, endpoint: RemoteEndpoint, actor: Actor) -> HealthResult:
    """An operator-requested probe (admin or API), audited; refused while the endpoint's
    team is frozen."""
    ensure_writable(endpoint.team_id)
    result = endpoint_probe(endpoint)
    audit_record(
        actor=actor,
        action="remoteendpoint.check",
        target_type="remoteendpoint",
        target_id=endpoint.pk,
        team=endpoint.team_id,
        after={
            "health": Health.HEALTHY if result.ok else Health.FAILING,
            "card_name": result.card_name,
            "transport": result.transport,
            "error": result.error,
        },
    )
    return result


def endpoint_backend_for_spec(spec: dict[str, Any]) -> A2ABackend | None:
    """The backend of a pinned agent version: A2A for a remote agent, None for a local one.
    An endpoint that cannot be used gives a backend that fails the run saying why."""
    slug = spec.get("endpoint_id")
    if not slug:
        return None
    model = spec.get("model_id") or f"a2a:{slug}"
    endpoint = RemoteEndpoint.objects.filter(slug=slug).first()
    if endpoint is None:
        return A2ABackend(None, model=model, unavailable=f"remote endpoint '{slug}' not found")
    try:
        config = endpoint_config(endpoint)
    except (A2AConfigError, SecretError) as exc:
        message = f"remote endpoint '{slug}' is misconfigured: {exc}"
        endpoint_health_record(endpoint_id=endpoint.pk, ok=False, error=message)
        return A2ABackend(None, model=model, unavailable=message)
    endpoint_id = endpoint.pk

    def on_health(ok: bool, error: str) -> None:
        endpoint_health_record(endpoint_id=endpoint_id, ok=ok, error=error)

    return A2ABackend(config, model=model, on_health=on_health)
