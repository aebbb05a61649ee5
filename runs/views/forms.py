"""Errors of page actions, shown inside the form that was sent.

A page action (a form posted from an operator page, by htmx or as a plain form) lets a
`ServiceError` rise: a refusal, a frozen team (409 `team_frozen`), invalid input from a
service (also Django's `ValidationError`), or a NUL character in a field (which the
database cannot store; `awaken_site.middleware.RejectNulMiddleware` lets it through to
the actions marked here). `page_action` catches it and answers with the view's renderer:
the panel the htmx form targets, or the whole page for a plain form post, with the
message inside the form that was sent and what was typed kept, in the error's status. No
bare text, no redirect that loses the input."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import wraps
from typing import Any, cast

from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, QueryDict
from django.template.loader import render_to_string
from django.utils.module_loading import import_string

from common.errors import InvalidInput, ServiceError
from runs.selectors.filters import has_nul, without_nul

NUL = "\x00"
SHOWN_NUL = "\ufffd"  # where the refused NUL was, in the value kept for the form
MARK = "handles_form_errors"  # set on a view that renders its own form errors
FILTERS_MARK = "reads_filters"  # set on a list page that names its bad filters


@dataclass
class FormError:
    """An error of one form: the form posting to `url` (with `action` as its `action`
    field: several forms post to one URL), the message, its code and what was sent.
    `shown` turns true once a form showed it (runs/templatetags/form_errors.py)."""

    url: str
    action: str
    text: str
    code: str
    status: int
    values: dict[str, str] = field(default_factory=dict)
    shown: bool = False

    def is_for(self, url: str, action: str = "") -> bool:
        return self.url == url and (not action or self.action == action)

    def value(self, name: str, default: Any = "") -> Any:
        return self.values.get(name, default)


def shown_values(data: QueryDict) -> dict[str, str]:
    """The form's fields as they are shown again: NUL replaced by U+FFFD, the last value
    of a repeated field."""
    return {
        key.replace(NUL, SHOWN_NUL): str(value).replace(NUL, SHOWN_NUL)
        for key, value in data.items()
    }


def shown_data(data: QueryDict) -> QueryDict:
    """A copy of the form's data to show again (every value, NUL replaced by U+FFFD)."""
    shown = QueryDict(mutable=True)
    for key, values in data.lists():
        shown.setlist(key.replace(NUL, SHOWN_NUL), [str(v).replace(NUL, SHOWN_NUL) for v in values])
    return shown


def form_error(request: HttpRequest, exc: ServiceError) -> FormError:
    data = request.POST if request.method == "POST" else request.GET
    return FormError(
        url=request.path,
        action=data.get("action", "").replace(NUL, SHOWN_NUL),
        text=exc.message,
        code=exc.code,
        status=exc.status,
        values=shown_values(data),
    )


def render_form_error(
    request: HttpRequest,
    template: str,
    context: dict[str, Any],
    error: FormError,
    unshown: str = "",
) -> HttpResponse:
    """`template` with `error` inside its form. When no form on it showed the error (the
    form is not on this page or panel any more), it is rendered again with the context's
    `unshown` entry set to the error as a flash (a panel that keeps outcomes), else the
    message is put on top: it is never lost. A whole page sent to an htmx request
    replaces the page's body."""
    context["form_error"] = error
    html: str = render_to_string(template, context, request=request)
    headers = {}
    if not error.shown and unshown:
        context[unshown] = {"level": "error", "text": error.text}
        html = render_to_string(template, context, request=request)
    elif not error.shown:
        message = render_to_string("runs/partials/form_error.html", {"error": error})
        html = html.replace("<main>", "<main>" + message, 1) if "<main>" in html else message + html
    if "<main>" in html and request.headers.get("HX-Request") == "true":
        headers = {"HX-Retarget": "body", "HX-Reswap": "innerHTML"}
    return HttpResponse(html, status=error.status, headers=headers)


def ensure_storable(request: HttpRequest) -> None:
    """Raise `InvalidInput` naming the first field whose name or value holds a NUL."""
    for key, values in request.POST.lists():
        if NUL in key or any(NUL in value for value in values):
            name = key.replace(NUL, SHOWN_NUL)
            raise InvalidInput(
                f'"{name}" contains a NUL character (\\u0000), which cannot be stored: '
                "remove it and send again.",
                {"field": name},
            )


def _service_error(exc: ValidationError) -> InvalidInput:
    return InvalidInput(" ".join(exc.messages))


Renderer = Callable[..., HttpResponse]


def page_action(render_error: Renderer | str) -> Callable[[Renderer], Renderer]:
    """Mark a page action whose errors `render_error(request, error, *args, **kwargs)`
    shows inside its form (`error` is a `FormError`). The view raises; it need not catch.
    `render_error` may be a dotted path, imported at the first error (the page modules
    import the modules of their actions)."""

    def decorator(view: Renderer) -> Renderer:
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            try:
                if request.method == "POST":
                    ensure_storable(request)
                try:
                    return view(request, *args, **kwargs)
                except ValidationError as exc:
                    raise _service_error(exc) from exc
            except ServiceError as exc:
                render = (
                    import_string(render_error) if isinstance(render_error, str) else render_error
                )
                return render(request, form_error(request, exc), *args, **kwargs)

        setattr(wrapped, MARK, True)
        return wrapped

    return decorator


def handles_form_errors(view: Any) -> bool:
    """Whether `view` (a resolved view function) shows its own form errors."""
    return bool(getattr(view, MARK, False))


def filter_page(view: Renderer) -> Renderer:
    """Mark a list page that reads its query string with `QueryFilters` (which names a bad
    filter above the list, in a 400): a NUL in a filter is one more bad value there, not
    the bare refusal of `awaken_site.middleware.RejectNulMiddleware`. The view sees the
    query string with each NUL shown as U+FFFD (never stored nor searched for), and the
    filters that held one are named."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if has_nul(request.GET):
            request.GET = cast(Any, without_nul(request.GET))  # immutable, as Django's
        return view(request, *args, **kwargs)

    setattr(wrapped, FILTERS_MARK, True)
    return wrapped


def names_bad_filters(view: Any) -> bool:
    """Whether `view` (a resolved view function) names a NUL in its filters itself."""
    return bool(getattr(view, FILTERS_MARK, False))
