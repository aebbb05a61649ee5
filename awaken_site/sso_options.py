"""The settings of single sign-on (OpenID Connect, docs/sso.md), kept out of settings.py
(at its size cap), which takes them all."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from .env import env_bool, env_float, env_str

__all__ = [
    "AWAKEN_LOCAL_LOGIN",
    "LOGIN_REDIRECT_URL_FAILURE",
    "OIDC_CLIENT_ID",
    "OIDC_CLIENT_SECRET",
    "OIDC_CREATE_TEAMS",
    "OIDC_GROUPS_CLAIM",
    "OIDC_GROUP_PREFIX",
    "OIDC_ISSUER",
    "OIDC_PROVIDER_NAME",
    "OIDC_RP_CLIENT_ID",
    "OIDC_RP_CLIENT_SECRET",
    "OIDC_RP_SCOPES",
    "OIDC_SCOPES",
    "OIDC_STORE_ID_TOKEN",
    "OIDC_TIMEOUT",
    "OIDC_USE_PKCE",
]

# On when OIDC_ISSUER is set; the provider's endpoints come from its discovery document,
# fetched on first use (never here: the site starts while the provider is down).
OIDC_ISSUER = env_str("OIDC_ISSUER").strip().rstrip("/")
OIDC_CLIENT_ID = env_str("OIDC_CLIENT_ID")
OIDC_CLIENT_SECRET = env_str("OIDC_CLIENT_SECRET")
OIDC_SCOPES = env_str("OIDC_SCOPES", "openid email profile")
OIDC_GROUPS_CLAIM = env_str("OIDC_GROUPS_CLAIM", "groups")
OIDC_GROUP_PREFIX = env_str("OIDC_GROUP_PREFIX", "awaken:")
OIDC_PROVIDER_NAME = env_str("OIDC_PROVIDER_NAME", "single sign-on")
OIDC_CREATE_TEAMS = env_bool("OIDC_CREATE_TEAMS", True)
# on: password form for everyone; superusers: break-glass only; off: no password sign-in
AWAKEN_LOCAL_LOGIN = env_str("AWAKEN_LOCAL_LOGIN", "on").strip().lower()
if AWAKEN_LOCAL_LOGIN not in ("on", "superusers", "off"):
    raise ImproperlyConfigured(
        f"AWAKEN_LOCAL_LOGIN must be on, superusers or off, got {AWAKEN_LOCAL_LOGIN!r}"
    )
if AWAKEN_LOCAL_LOGIN == "off" and not OIDC_ISSUER:
    raise ImproperlyConfigured("AWAKEN_LOCAL_LOGIN=off needs OIDC_ISSUER (nobody could sign in)")
if OIDC_ISSUER and not OIDC_CLIENT_ID:
    raise ImproperlyConfigured("OIDC_ISSUER is set but OIDC_CLIENT_ID is empty")
# what mozilla-django-oidc reads (the endpoints are filled in from discovery per request)
OIDC_RP_CLIENT_ID = OIDC_CLIENT_ID
OIDC_RP_CLIENT_SECRET = OIDC_CLIENT_SECRET
OIDC_RP_SCOPES = OIDC_SCOPES
OIDC_TIMEOUT = env_float("OIDC_TIMEOUT", 10.0, minimum=0.5)
OIDC_USE_PKCE = True
OIDC_STORE_ID_TOKEN = True  # the hint for the provider's logout
LOGIN_REDIRECT_URL_FAILURE = "login"
