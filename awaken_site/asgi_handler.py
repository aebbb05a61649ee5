"""Django's ASGI handler with a request's middleware and view run in ONE thread hop.

Under an ASGI server Django keeps its middleware chain asynchronous, and each middleware
written the classic way (`process_request`/`process_response`: Django's own session,
CSRF, auth, messages, security, common and clickjacking middleware are) runs each of those
methods through `sync_to_async`, a hop to the request's thread and back. Twelve such
middleware and a synchronous view cost a request about twenty hops, each an executor
submission, a thread wake-up, a future and a loop callback: about a tenth of a web
process's CPU under load. Here the chain is built synchronous, as under WSGI, and a
request's whole middleware-and-view pass is ONE `sync_to_async` call on the request's
thread (the thread Django gives each request's synchronous parts anyway). Streaming
responses still stream on the event loop: an event stream's async iterator is consumed
by the handler as before.
"""

from __future__ import annotations

import django
from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler
from django.http import HttpRequest, HttpResponseBase


class OneHopASGIHandler(ASGIHandler):
    def __init__(self) -> None:
        super().__init__()
        self.load_middleware(is_async=False)

    async def get_response_async(self, request: HttpRequest) -> HttpResponseBase:
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)


def http_application() -> OneHopASGIHandler:
    """The site's HTTP app (Django set up first, as `get_asgi_application` does)."""
    django.setup(set_prefix=False)
    return OneHopASGIHandler()
