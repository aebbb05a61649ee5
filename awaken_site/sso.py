"""Single sign-on with OpenID Connect (docs/sso.md).

SSO is on when settings.OIDC_ISSUER is set. The provider's endpoints come from its
discovery document, fetched on first use and cached per process. Users are matched by the
`sub` claim (username `sso:<sub>`); at every login their site-wide role groups, their `sso`
team memberships and is_staff are set from the groups claim; local memberships are kept.
"""

from __future__ import annotations

import logging
import re
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
from django.contrib.auth.models import Group, Permission
from django.core.exceptions import SuspiciousOperation
from django.core.validators import validate_email
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.utils.decorators import method_decorator
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from common.access import forget
from common.audit import Actor, audit_record
from common.models import Membership, Role, Team
from common.roles import ROLES
from common.teams import membership_remove, membership_set

logger = logging.getLogger(__name__)

SSO_ACTOR = Actor(label="sso", source="system")
USERNAME_PREFIX = "sso:"
MAX_SUB = 150 - len(USERNAME_PREFIX)
MAX_GROUP_VALUES = 500  # more is not a real user's group list
MAX_GROUP_VALUE = 200
_SLUG = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
_RANK: dict[str, int] = {Role.VIEWER.value: 1, Role.OPERATOR.value: 2, Role.ADMIN.value: 3}
# id token algorithms the code flow verifies: asymmetric ones with the provider's JWKS,
# HMAC ones with the client secret (mozilla-django-oidc's two paths)
_ASYMMETRIC = ("RS256", "RS384", "RS512", "ES256", "ES384", "ES512")
_HMAC = ("HS256", "HS384", "HS512")


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


# --- claims mapping --------------------------------------------------------------------------


def parse_groups(values: Any) -> tuple[set[str], dict[str, str]]:
    """(site-wide roles, {team slug: role}) from the groups claim. `<prefix><role>` is a
    site-wide role, `<prefix><team>:<role>` a team role (the highest wins); anything else,
    including values that are not strings, is ignored."""
    prefix = settings.OIDC_GROUP_PREFIX
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, list | tuple):
        return set(), {}
    site: set[str] = set()
    teams: dict[str, str] = {}
    for value in values[:MAX_GROUP_VALUES]:
        if not isinstance(value, str) or len(value) > MAX_GROUP_VALUE:
            continue
        if not value.startswith(prefix):
            continue
        rest = value[len(prefix) :]
        if rest in _RANK:
            site.add(rest)
            continue
        slug, sep, role = rest.rpartition(":")
        if not sep or role not in _RANK or not _SLUG.fullmatch(slug):
            continue
        if _RANK[role] > _RANK.get(teams.get(slug, ""), 0):
            teams[slug] = role
    return site, teams


def _text(value: Any, limit: int) -> str:
    if not isinstance(value, str):
        return ""
    return value.replace("\x00", "").strip()[:limit]


def _update_profile(user: Any, claims: dict[str, Any]) -> None:
    email = _text(claims.get("email"), 254)
    try:
        validate_email(email)
    except forms.ValidationError:
        email = ""
    first = _text(claims.get("given_name"), 150)
    last = _text(claims.get("family_name"), 150)
    if not first and not last:
        first, _, last = _text(claims.get("name"), 301).partition(" ")
        first, last = first[:150], last.strip()[:150]
    changed = (user.email, user.first_name, user.last_name) != (email, first, last)
    user.email, user.first_name, user.last_name = email, first, last
    if changed and user.pk:
        user.save(update_fields=["email", "first_name", "last_name"])


def _role_group(name: str) -> Group:
    """The role group (made by the roles migrations; recreated with its permissions if
    missing)."""
    group, created = Group.objects.get_or_create(name=name)
    if created:
        for app_label, codename in ROLES[name]:
            permission = Permission.objects.filter(
                content_type__app_label=app_label, codename=codename
            ).first()
            if permission is not None:
                group.permissions.add(permission)
    return group


def _sync_groups(user: Any, wanted: set[str]) -> None:
    current = set(user.groups.filter(name__in=list(_RANK)).values_list("name", flat=True))
    if current == wanted:
        return
    user.groups.remove(*Group.objects.filter(name__in=list(current - wanted)))
    user.groups.add(*[_role_group(name) for name in sorted(wanted - current)])
    audit_record(
        actor=SSO_ACTOR,
        action="user.roles",
        target_type="user",
        target_id=user.get_username(),
        before={"roles": sorted(current)},
        after={"roles": sorted(wanted)},
    )


def _team_for(slug: str) -> Team | None:
    team = Team.objects.filter(slug=slug).first()
    if team is None and settings.OIDC_CREATE_TEAMS:
        team, created = Team.objects.get_or_create(slug=slug, defaults={"name": slug})
        if created:
            audit_record(
                actor=SSO_ACTOR,
                action="team.create",
                target_type="team",
                target_id=slug,
                team=team,
                after={"slug": slug, "name": slug},
            )
    return team


def _sync_memberships(user: Any, wanted: dict[str, str]) -> None:
    existing = {m.team.slug: m for m in Membership.objects.filter(user=user).select_related("team")}
    for slug, membership in existing.items():
        if membership.source == Membership.Source.SSO and slug not in wanted:
            membership_remove(membership=membership, actor=SSO_ACTOR)
    for slug, role in sorted(wanted.items()):
        current = existing.get(slug)
        if current is not None and current.source == Membership.Source.LOCAL:
            continue  # granted here, not by the provider: kept as it is
        if current is not None and current.role == role:
            continue
        team = current.team if current is not None else _team_for(slug)
        if team is not None:
            membership_set(
                team=team, user=user, role=role, actor=SSO_ACTOR, source=Membership.Source.SSO
            )


@transaction.atomic
def sync_user(user: Any, claims: dict[str, Any]) -> Any:
    """Make the user's profile, role groups, sso memberships and is_staff match the claims."""
    _update_profile(user, claims)
    site_roles, team_roles = parse_groups(claims.get(settings.OIDC_GROUPS_CLAIM))
    _sync_groups(user, site_roles)
    _sync_memberships(user, team_roles)
    is_staff = (
        user.is_superuser
        or Role.ADMIN in site_roles
        or Membership.objects.filter(user=user, role=Role.ADMIN).exists()
    )
    if user.is_staff != is_staff:
        user.is_staff = is_staff
        user.save(update_fields=["is_staff"])
    forget(user)
    return user


def valid_sub(claims: dict[str, Any]) -> str | None:
    sub = claims.get("sub")
    if not isinstance(sub, str) or not 0 < len(sub) <= MAX_SUB or "\x00" in sub:
        return None
    return sub


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
        """The provider's signing key for `token`: the one its `kid` names, or (a provider
        that sets no kid) the one key of the token's algorithm."""
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

    def _verify_jws(self, payload: Any, key: Any) -> Any:
        try:
            alg = jwt.get_unverified_header(payload).get("alg")
            if alg != self.OIDC_RP_SIGN_ALGO:
                raise SuspiciousOperation(
                    f"id token signed with {alg!r}, not {self.OIDC_RP_SIGN_ALGO}"
                )
            return jwt.decode(
                payload,
                key,
                algorithms=[self.OIDC_RP_SIGN_ALGO],
                audience=self.OIDC_RP_CLIENT_ID,
                issuer=self.issuer,
                options={"require": ["exp", "iat", "sub", "aud", "iss"]},
            )
        except jwt.PyJWTError as exc:
            raise SuspiciousOperation(f"id token rejected: {exc}") from exc

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
            _update_profile(user, claims)
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
    error = _text(request.GET.get("error"), 100)
    description = _text(request.GET.get("error_description"), 300)
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
