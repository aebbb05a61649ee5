"""What the pages' htmx requests need from a view."""

from __future__ import annotations

from django.http import HttpRequest


def is_htmx(request: HttpRequest) -> bool:
    """The request came from htmx (it answers with a fragment, not a redirect)."""
    return request.headers.get("HX-Request") == "true"
