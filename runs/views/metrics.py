"""`/metrics`: the Prometheus exposition (runs.metrics, docs/metrics.md).

With AWAKEN_METRICS_TOKEN set, a scrape must send `Authorization: Bearer <token>` (401
otherwise). Without a token the page does not exist (404) unless AWAKEN_METRICS_PUBLIC
is true, for a site only a private network reaches. No login, no CSRF (GET only), and
never cached.
"""

from __future__ import annotations

import hmac

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from runs import metrics


def _authorized(request: HttpRequest, token: str) -> bool:
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode(), token.encode()
    )


@login_not_required
@never_cache
@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    token = settings.AWAKEN_METRICS_TOKEN
    if token:
        if not _authorized(request, token):
            response = HttpResponse("a metrics token is required\n", status=401)
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
            return response
    elif not settings.AWAKEN_METRICS_PUBLIC:
        raise Http404("metrics are off: set AWAKEN_METRICS_TOKEN")
    body, content_type = metrics.exposition(request.headers.get("Accept"))
    return HttpResponse(body, content_type=content_type)
