"""Single sign-on with OpenID Connect (docs/sso.md).

SSO is on when settings.OIDC_ISSUER is set. The provider's endpoints come from its
discovery document, fetched on first use and cached per process. The code flow and the id
token's verification are mozilla-django-oidc's, with the checks it leaves out added on its
public hooks (`SSOBackend`). Users are matched by the `sub` claim (username `sso:<sub>`);
at every login their site-wide role groups, their `sso` team memberships and is_staff are
set from the groups claim (awaken_site/sso_claims.py); local memberships are kept.
"""

from __future__ import annotations

import logging
import threading
from typing import Any
from urllib.parse import urlencode

import jwt
import requests
from django import forms
from django.conf import settings
from django.contrib import auth, messages
from django.contrib.auth import get_user_model
from django.contrib.auth import views as auth_views
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import SuspiciousOperation
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.utils.decorators import method_decorator
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from awaken_site.sso_claims import (
    USERNAME_PREFIX,
    clean_text,
    sync_user,
    update_profile,
    valid_sub,
)

logger = logging.getLogger(__name__)

# id token algorithms the code flow verifies: asymmetric ones with the provider's JWKS,
# HMAC ones with the client secret (mozilla-django-oidc's two paths)
_ASYMMETRIC = ("RS256", "RS384", "RS512", "ES256", "ES384", "ES512")
_HMAC = ("HS256", "HS384", "HS512")
ID_TOKEN_CLAIMS = ("iss", "sub", "aud", "exp", "iat")  # required in every id token


class SSOUnavailable(Exception):
    """The identity provider cannot be used now; the message is shown to the user."""


def sso_enabled() -> bool:
    return bool(settings.OIDC_ISSUER)


def local_login() -> str:
    """on | superusers | off (AWAKEN_LOCAL_LOGIN)."""
    return str(settings.AWAKEN_LOCAL_LOGIN)


# --- discovery -------------------------------------------------------------------------------

_discovered: dict[str, dict[str, Any]] = {}
_discovery_lock = threading.Lock()


def forget_discovery() -> None:
    with _discovery_lock:
        _discovered.clear()


def _unavailable(issuer: str) -> SSOUnavailable:
    return SSOUnavailable(
        f"Single sign-on is unavailable: the identity provider at {issuer} did not answer "
        "with a usable configuration. Try again later, or ask an administrator."
    )


def discovery() -> dict[str, Any]:
    """The provider's discovery document, fetched once per process (failures are not
    cached: the next sign-in tries again)."""
    issuer = settings.OIDC_ISSUER
    with _discovery_lock:
        cached = _discovered.get(issuer)
    if cached is not None:
        return cached
    url = f"{issuer}/.well-known/openid-configuration"
    try:
        response = requests.get(url, timeout=settings.OIDC_TIMEOUT)
        response.raise_for_status()
        document = response.json()
    except (requests.RequestException, ValueError) as exc:
        logger.warning("OIDC discovery at %s failed: %s", url, exc)
        raise _unavailable(issuer) from exc
    if not _valid_discovery(document, issuer):
        logger.warning("OIDC discovery at %s: unusable document", url)
        raise _unavailable(issuer)
    with _discovery_lock:
        _discovered[issuer] = document
    return document


def _valid_discovery(document: Any, issuer: str) -> bool:
    if not isinstance(document, dict):
        return False
    if str(document.get("issuer", "")).rstrip("/") != issuer:
        return False
    for key in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
        value = document.get(key)
        if not isinstance(value, str) or not value.startswith(("https://", "http://")):
            return False
    try:
        signing_algorithm(document)
    except SSOUnavailable:
        return False
    return True


def signing_algorithm(document: dict[str, Any]) -> str:
    """The id token algorithm to require: RS256 when offered (the usual), else the first
    offered one this client can verify; never "none"."""
    offered = document.get("id_token_signing_alg_values_supported") or ["RS256"]
    if not isinstance(offered, list):
        offered = ["RS256"]
    usable = _ASYMMETRIC + (_HMAC if settings.OIDC_CLIENT_SECRET else ())
    if "RS256" in offered:
        return "RS256"
    for alg in offered:
        if alg in usable:
            return str(alg)
    raise SSOUnavailable("The identity provider signs id tokens with no supported algorithm.")


# --- authentication backends -----------------------------------------------------------------


class PasswordBackend(ModelBackend):
    """Django's username/password backend, refusing what AWAKEN_LOCAL_LOGIN does not
    allow (every password form, the admin's included, goes through here)."""

    def authenticate(
        self, request: Any, username: Any = None, password: Any = None, **kwargs: Any
    ) -> Any:
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is None:
            return None
        mode = local_login()
        if mode == "on" or (mode == "superusers" and user.is_superuser):
            return user
        return None


class SSOBackend(OIDCAuthenticationBackend):
    """The OIDC code flow of mozilla-django-oidc with endpoints from discovery, id tokens
    checked for signature, issuer, audience and expiry, and users matched by `sub`. It
    grants no permissions itself (the other backends answer those)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.UserModel = get_user_model()
        self.OIDC_RP_CLIENT_ID = settings.OIDC_CLIENT_ID
        self.OIDC_RP_CLIENT_SECRET = settings.OIDC_CLIENT_SECRET
        self.OIDC_RP_IDP_SIGN_KEY = None
        self.OIDC_OP_TOKEN_ENDPOINT = self.OIDC_OP_USER_ENDPOINT = None
        self.OIDC_OP_JWKS_ENDPOINT = None
        self.OIDC_RP_SIGN_ALGO = "RS256"
        self.issuer = ""

    def authenticate(self, request: Any, **kwargs: Any) -> Any:
        # only the callback view's call (it passes the nonce), never a password form's
        if request is None or "nonce" not in kwargs or "password" in kwargs:
            return None
        if not sso_enabled():
            return None
        document = discovery()
        self.OIDC_OP_TOKEN_ENDPOINT = document["token_endpoint"]
        self.OIDC_OP_USER_ENDPOINT = document.get("userinfo_endpoint")
        self.OIDC_OP_JWKS_ENDPOINT = document["jwks_uri"]
        self.OIDC_RP_SIGN_ALGO = signing_algorithm(document)
        self.issuer = str(document["issuer"])
        return super().authenticate(request, **kwargs)

    def retrieve_matching_jwk(self, token: Any) -> Any:
        """Hook: the provider's signing key for `token`: the one its `kid` names, or (a
        provider that sets no kid) the one key of the token's algorithm, bound to that
        algorithm (a JWKS entry without `alg` would otherwise verify as RS256 only). The
        library's version needs a kid on both sides. The JWKS is read at every sign-in,
        so a rotated key is found without a restart."""
        response = requests.get(self.OIDC_OP_JWKS_ENDPOINT or "", timeout=settings.OIDC_TIMEOUT)
        response.raise_for_status()
        keys = response.json().get("keys")
        header = jwt.get_unverified_header(token)
        kid, alg = header.get("kid"), header.get("alg")
        candidates = [
            key
            for key in (keys if isinstance(keys, list) else [])
            if isinstance(key, dict)
            and key.get("use", "sig") == "sig"
            and key.get("alg", alg) == alg
            and (kid is None or key.get("kid") == kid)
        ]
        if len(candidates) != 1:
            raise SuspiciousOperation(f"no single signing key in the JWKS for kid {kid!r}")
        try:
            return jwt.PyJWK(candidates[0], algorithm=alg)
        except jwt.PyJWTError as exc:
            raise SuspiciousOperation(f"unusable signing key: {exc}") from exc

    def get_payload_data(self, token: Any, key: Any) -> Any:
        """The id token's claims once verified. The library's `verify_token` picks the key
        (`retrieve_matching_jwk`, or the client secret for HMAC), checks the signature,
        that the token is signed with OIDC_RP_SIGN_ALGO and not expired, and the nonce;
        `check_id_token_claims` adds what it leaves out."""
        try:
            payload = super().get_payload_data(token, key)
        except jwt.PyJWTError as exc:
            raise SuspiciousOperation(f"id token rejected: {exc}") from exc
        self.check_id_token_claims(payload)
        return payload

    def check_id_token_claims(self, claims: Any) -> None:
        """Hook: the checks of OpenID Connect Core 3.1.3.7 the library does not make: the
        registered claims are there, the issuer is the discovered one and the token is
        for this client (an audience list names it, and its `azp` when it names others)."""
        if not isinstance(claims, dict):
            raise SuspiciousOperation("id token rejected: its payload is not an object")
        missing = [name for name in ID_TOKEN_CLAIMS if claims.get(name) in (None, "")]
        if missing:
            raise SuspiciousOperation(f"id token rejected: no {', '.join(missing)} claim")
        if claims["iss"] != self.issuer:
            raise SuspiciousOperation(f"id token rejected: issued by {claims['iss']!r}")
        audience = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        if self.OIDC_RP_CLIENT_ID not in audience:
            raise SuspiciousOperation("id token rejected: it is for another client")
        if len(audience) > 1 and claims.get("azp") != self.OIDC_RP_CLIENT_ID:
            raise SuspiciousOperation("id token rejected: authorized for another party")

    def get_userinfo(self, access_token: Any, id_token: Any, payload: Any) -> dict[str, Any]:
        claims = dict(payload)
        if self.OIDC_OP_USER_ENDPOINT:
            info = super().get_userinfo(access_token, id_token, payload)
            if not isinstance(info, dict) or info.get("sub") != payload.get("sub"):
                raise SuspiciousOperation("userinfo is about another subject")
            claims.update(info)
        return claims

    def verify_claims(self, claims: Any) -> bool:
        return valid_sub(claims) is not None

    def filter_users_by_claims(self, claims: Any) -> Any:
        return self.UserModel.objects.filter(username=USERNAME_PREFIX + str(valid_sub(claims)))

    def create_user(self, claims: Any) -> Any:
        with transaction.atomic():
            user = self.UserModel(username=USERNAME_PREFIX + str(valid_sub(claims)))
            user.set_unusable_password()
            update_profile(user, claims)
            user.save()
            return sync_user(user, claims)

    def update_user(self, user: Any, claims: Any) -> Any:
        return sync_user(user, claims)

    # permissions come from ModelBackend (groups) and TeamRoleBackend (memberships)
    def has_perm(self, user_obj: Any, perm: str, obj: Any = None) -> bool:
        return False

    def has_module_perms(self, user_obj: Any, app_label: str) -> bool:
        return False

    def get_all_permissions(self, user_obj: Any, obj: Any = None) -> set[str]:
        return set()

    def get_user_permissions(self, user_obj: Any, obj: Any = None) -> set[str]:
        return set()

    def get_group_permissions(self, user_obj: Any, obj: Any = None) -> set[str]:
        return set()


# --- views -----------------------------------------------------------------------------------


def _fail(request: HttpRequest, message: str) -> HttpResponse:
    messages.error(request, message)
    return HttpResponseRedirect(reverse("login"))


class PasswordLoginForm(AuthenticationForm):
    error_messages = {
        **AuthenticationForm.error_messages,
        "invalid_login": "Your username and password didn't match. Please try again.",
    }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if local_login() == "superusers":
            self.error_messages = {
                **self.error_messages,
                "invalid_login": (
                    "Your username and password didn't match, or this account may not use "
                    "password sign-in: only break-glass superuser accounts may. Please use "
                    f"“Sign in with {settings.OIDC_PROVIDER_NAME}”."
                ),
            }

    def clean(self) -> dict[str, Any]:
        if local_login() == "off":
            raise forms.ValidationError(
                "Password sign-in is turned off on this site. Please use "
                f"“Sign in with {settings.OIDC_PROVIDER_NAME}”.",
                code="local_login_off",
            )
        return super().clean()


class LoginView(auth_views.LoginView):
    """The password form (unless AWAKEN_LOCAL_LOGIN=off) and the single sign-on button."""

    form_class = PasswordLoginForm
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        mode = local_login()
        context.update(
            sso_enabled=sso_enabled(),
            sso_name=settings.OIDC_PROVIDER_NAME,
            password_form=mode != "off" or not sso_enabled(),
            break_glass=mode == "superusers",
        )
        return context


@method_decorator(login_not_required, name="dispatch")
class SSOStartView(OIDCAuthenticationRequestView):
    """Redirects to the provider's authorization endpoint (from discovery)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super(OIDCAuthenticationRequestView, self).__init__(*args, **kwargs)
        self.OIDC_RP_CLIENT_ID = settings.OIDC_CLIENT_ID
        self.OIDC_OP_AUTH_ENDPOINT = ""

    def get(self, request: HttpRequest) -> HttpResponse:
        if not sso_enabled():
            raise Http404("single sign-on is not configured")
        try:
            self.OIDC_OP_AUTH_ENDPOINT = discovery()["authorization_endpoint"]
        except SSOUnavailable as exc:
            return _fail(request, str(exc))
        return super().get(request)


def _provider_error(request: HttpRequest) -> str:
    error = clean_text(request.GET.get("error"), 100)
    description = clean_text(request.GET.get("error_description"), 300)
    if error == "access_denied":
        text = "Sign-in was denied at the identity provider."
    else:
        text = f"The identity provider refused the sign-in ({error})."
    return f"{text} {description}".strip()


@method_decorator(login_not_required, name="dispatch")
class SSOCallbackView(OIDCAuthenticationCallbackView):
    """Where the provider sends the browser back; every failure lands on the login page
    with a message (never a server error)."""

    def get(self, request: HttpRequest) -> HttpResponse:
        if not sso_enabled():
            raise Http404("single sign-on is not configured")
        states = request.session.get("oidc_states") or {}
        state = request.GET.get("state")
        if request.GET.get("error"):
            if state in states:
                del states[state]
                request.session.modified = True
            if request.user.is_authenticated:
                auth.logout(request)
            return _fail(request, _provider_error(request))
        if not request.GET.get("code") or state not in states:
            return _fail(
                request,
                "This sign-in attempt is unknown or has expired (it may have been started in "
                "another browser, or already used). Please sign in again.",
            )
        try:
            return super().get(request)
        except SSOUnavailable as exc:
            return _fail(request, str(exc))
        except (
            requests.RequestException,
            SuspiciousOperation,
            jwt.PyJWTError,
            ValueError,
            KeyError,
            TypeError,
        ) as exc:
            logger.warning("OIDC sign-in failed: %s", exc)
            return _fail(
                request,
                "Single sign-on failed: the identity provider's answer could not be verified.",
            )

    def login_failure(self) -> HttpResponse:
        return _fail(
            self.request,
            "Single sign-on did not sign you in: the account is missing, disabled or "
            "its identity was rejected.",
        )


class LogoutView(auth_views.LogoutView):
    """Ends the session; a user who came through single sign-on then goes to the
    provider's end_session_endpoint (when it has one) to sign out there too.

    Not by redirecting the logout form's POST there: the pages' Content-Security-Policy
    (`form-action 'self'`) governs every redirect that follows a form submission, so the
    browser would refuse the hop to the provider and its session would live on (the next
    "Sign in" going straight through). The POST ends on a page of this site, which sends
    the browser on to the provider (a refresh, and a link), a navigation of its own."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        id_token = request.session.get("oidc_id_token")
        response = super().post(request, *args, **kwargs)
        if not id_token or not sso_enabled():
            return response
        try:
            endpoint = discovery().get("end_session_endpoint")
        except SSOUnavailable:
            return response
        if not isinstance(endpoint, str) or not endpoint.startswith(("https://", "http://")):
            return response
        query = urlencode(
            {
                "id_token_hint": id_token,
                "client_id": settings.OIDC_CLIENT_ID,
                "post_logout_redirect_uri": request.build_absolute_uri(reverse("login")),
            }
        )
        provider_logout = f"{endpoint}{'&' if '?' in endpoint else '?'}{query}"
        page = render(
            request,
            "registration/sso_logout.html",
            {"provider_logout": provider_logout, "sso_name": settings.OIDC_PROVIDER_NAME},
        )
        add_never_cache_headers(page)  # the URL carries the id token as its hint
        return page
