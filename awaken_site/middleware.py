"""503 instead of a 500 (or a hung request) when no database connection is to be had:
the connection pool stayed exhausted for DB_POOL_TIMEOUT seconds."""

from __future__ import annotations

import logging
import sys
from typing import Any, cast

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.core.signals import got_request_exception
from django.http import HttpRequest, HttpResponse, JsonResponse

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


class RejectNulMiddleware(_SyncAndAsync):
    """400 for a NUL character in a query-string or form field: PostgreSQL refuses NUL in
    text, so a filter or a form value carrying one would reach the database and fail
    there as a 500. JSON bodies are checked by the API's parser."""

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
        if not (_has_nul(request.GET) or (form and _has_nul(request.POST))):
            return None
        message = "A field contains a NUL character, which cannot be stored."
        return error_response(request, 400, "parse_error", message)
