"""503 instead of a 500 (or a hung request) when no database connection is to be had:
the connection pool stayed exhausted for DB_POOL_TIMEOUT seconds."""

from __future__ import annotations

import logging
import sys
from typing import Any, cast

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.core.signals import got_request_exception
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.urls import Resolver404, resolve

from runs.views.forms import handles_form_errors, names_bad_filters

logger = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 2
_FLAG = "_awaken_database_unavailable"

try:
    from psycopg_pool import PoolTimeout
except ImportError:  # pragma: no cover - psycopg[pool] is a dependency

    class PoolTimeout(Exception):  # type: ignore[no-redef]
        pass


def is_pool_timeout(exc: BaseException | None) -> bool:
    """The pool's timeout, also when Django wrapped it in its own OperationalError."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, PoolTimeout):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def error_response(request: HttpRequest, status: int, code: str, message: str) -> HttpResponse:
    """The API's error shape under /api/, plain text for pages."""
    if request.path.startswith("/api/"):
        body = {"error": {"code": code, "message": message, "details": {}}}
        return JsonResponse(body, status=status)
    return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")


def database_unavailable_response(request: HttpRequest) -> HttpResponse:
    message = "The database is busy: no connection became free in time. Retry shortly."
    response = error_response(request, 503, "database_unavailable", message)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def _flag_request(sender: Any, request: HttpRequest | None = None, **kwargs: Any) -> None:
    # Django turns an exception outside the view (another middleware's process_view, a
    # lazy template) into a 500 response before this middleware sees it; the signal is
    # sent while the exception is being handled, so note it on the request.
    if request is not None and is_pool_timeout(sys.exc_info()[1]):
        setattr(request, _FLAG, True)


got_request_exception.connect(_flag_request, dispatch_uid="awaken-database-unavailable")


class _SyncAndAsync:
    """A middleware that runs in the server's own mode (no thread hop under daphne)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response
        self.async_mode = iscoroutinefunction(get_response)
        if self.async_mode:
            markcoroutinefunction(cast(Any, self))  # its subclasses define __call__


class DatabaseUnavailableMiddleware(_SyncAndAsync):
    """Place it early (outermost): it replaces the response of a request that failed
    because the pool timed out with a 503 and `Retry-After`."""

    def __call__(self, request: HttpRequest) -> Any:
        if self.async_mode:
            return self.__acall__(request)
        return self._finish(request, self.get_response(request))

    async def __acall__(self, request: HttpRequest) -> HttpResponse:
        return self._finish(request, await self.get_response(request))

    def _finish(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if getattr(request, _FLAG, False):
            return database_unavailable_response(request)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not is_pool_timeout(exception):
            return None
        logger.warning(
            "no database connection for %s %s: %s", request.method, request.path, exception
        )
        return database_unavailable_response(request)


def _has_nul(values: Any) -> bool:
    return any("\x00" in key or any("\x00" in v for v in vals) for key, vals in values.lists())


NUL_MESSAGE = "A field contains a NUL character (\\u0000), which cannot be stored: remove it."


def _view_of(request: HttpRequest) -> Any:
    try:
        return resolve(request.path_info).func
    except Resolver404:
        return None


def _form_handles_it(request: HttpRequest) -> bool:
    """The POST goes to a page action that shows its errors inside its form (it refuses
    the NUL there, keeping what was typed): runs.views.forms.page_action."""
    return handles_form_errors(_view_of(request))


def _list_handles_it(request: HttpRequest) -> bool:
    """The GET goes to a list page that names a NUL in a filter above its list, like any
    bad filter value: runs.views.forms.filter_page."""
    return request.method in ("GET", "HEAD") and names_bad_filters(_view_of(request))


def bad_request_page(request: HttpRequest, message: str) -> HttpResponse:
    """A 400 for the pages as HTML: a flash for htmx (swapped where the request pointed),
    a small page with a way back otherwise. No user is known yet at this depth."""
    template = (
        "runs/partials/flash.html"
        if request.headers.get("HX-Request") == "true"
        else "bad_request.html"
    )
    html = render_to_string(template, {"level": "error", "text": message})
    return HttpResponse(html, status=400)


class RejectNulMiddleware(_SyncAndAsync):
    """400 for a NUL character in a query-string or form field: PostgreSQL refuses NUL in
    text, so a filter or a form value carrying one would reach the database and fail
    there as a 500. A form posted to a page action that shows its own errors
    (runs.views.forms.page_action) goes through: it refuses the NUL inside the form; so
    does a query string sent to a list page that names its bad filters
    (runs.views.forms.filter_page).
    JSON bodies are checked by the API's parser."""

    def __call__(self, request: HttpRequest) -> Any:
        if self.async_mode:
            return self.__acall__(request)
        return self._refusal(request) or self.get_response(request)

    async def __acall__(self, request: HttpRequest) -> HttpResponse:
        return self._refusal(request) or await self.get_response(request)

    def _refusal(self, request: HttpRequest) -> HttpResponse | None:
        form = request.method == "POST" and request.content_type in (
            "application/x-www-form-urlencoded",
            "multipart/form-data",
        )
        refused = (_has_nul(request.GET) and not _list_handles_it(request)) or (
            form and _has_nul(request.POST) and not _form_handles_it(request)
        )
        if not refused:
            return None
        if request.path.startswith("/api/"):
            return error_response(request, 400, "parse_error", NUL_MESSAGE)
        return bad_request_page(request, NUL_MESSAGE)
