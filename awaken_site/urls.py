from django.contrib import admin
from django.contrib.auth.decorators import login_not_required
from django.http import (
    HttpRequest,
    HttpResponsePermanentRedirect,
    HttpResponseRedirect,
    JsonResponse,
)
from django.templatetags.static import static
from django.urls import include, path, re_path

from awaken_site import sso
from runs.api.health import readiness
from runs.views.metrics import metrics_view


@login_not_required
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


@login_not_required
def readyz(request: HttpRequest) -> JsonResponse:
    """Database, Celery broker and channel layer reachable: 200, else 503."""
    ok, checks = readiness()
    return JsonResponse(
        {"status": "ok" if ok else "unavailable", "checks": checks}, status=200 if ok else 503
    )


@login_not_required
def favicon(request: HttpRequest) -> HttpResponseRedirect:
    """Browsers ask for /favicon.ico whatever the page links; the icon is a static file,
    under its hashed name in production, so this redirect is temporary."""
    return HttpResponseRedirect(static("favicon.svg"))


# models that moved from the runs app to another app label, and where
MOVED_MODELS = {
    "auditentry": "common",
    "apitoken": "common",
    "replayset": "replays",
    "replayitem": "replays",
    **dict.fromkeys(
        (
            "failuregroup",
            "failuregrouprun",
            "notificationchannel",
            "notificationcircuit",
            "notificationdelivery",
            "notificationrule",
            "notificationsubscription",
        ),
        "operations",
    ),
    "savedview": "accounts",
}


def moved_admin(request: HttpRequest, model: str, rest: str) -> HttpResponsePermanentRedirect:
    """The audit trail and API tokens moved from the runs app to `common`, the domain apps'
    models to their apps: old admin links (bookmarks, links in tickets) land on the same
    page."""
    query = request.META.get("QUERY_STRING", "")
    return HttpResponsePermanentRedirect(
        f"/admin/{MOVED_MODELS[model]}/{model}/{rest}" + (f"?{query}" if query else "")
    )


urlpatterns = [
    path("favicon.ico", favicon, name="favicon"),
    re_path(r"^admin/runs/(?P<model>auditentry|apitoken)/(?P<rest>.*)$", moved_admin),
    re_path(
        r"^admin/runs/(?P<model>replayset|replayitem|failuregroup|failuregrouprun"
        r"|notification(?:channel|circuit|delivery|rule|subscription)|savedview)/(?P<rest>.*)$",
        moved_admin,
    ),
    path("admin/", admin.site.urls),
    path("login/", sso.LoginView.as_view(), name="login"),
    path("logout/", sso.LogoutView.as_view(), name="logout"),
    # single sign-on (OpenID Connect); the names are mozilla-django-oidc's
    path("oidc/authenticate/", sso.SSOStartView.as_view(), name="oidc_authentication_init"),
    path("oidc/callback/", sso.SSOCallbackView.as_view(), name="oidc_authentication_callback"),
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
    path("metrics", metrics_view, name="metrics"),
    path("api/v1/", include("awaken_site.api_urls")),
    path("", include("awaken_site.page_urls")),
]
