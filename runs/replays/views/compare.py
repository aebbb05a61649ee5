"""Two runs side by side (docs/compare.md): `GET /runs/compare/?a=<run id>&b=<run id>`."""

from __future__ import annotations

import uuid
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from runs.permissions import VIEW, may_see, require
from runs.replays.selectors.compare import run_compare, runs_for_compare

TEMPLATE = "runs/compare.html"


def compare_ids(params: Any) -> tuple[uuid.UUID, uuid.UUID] | str:
    """The two run ids of `?a=&b=`, or what is wrong with them (for a 400)."""
    found = []
    for name in ("a", "b"):
        raw = str(params.get(name, "") or "").strip()
        if not raw:
            return f"Choose two runs: the query needs both a and b (run ids); {name} is missing."
        try:
            found.append(uuid.UUID(raw))
        except ValueError:
            return f"{name} is not a run id (a UUID): {raw[:80]!r}."
    return found[0], found[1]


@require(VIEW, "view runs")
def run_compare_page(request: HttpRequest) -> HttpResponse:
    context: dict[str, Any] = {"nav": "runs", "params": request.GET}
    ids = compare_ids(request.GET)
    if isinstance(ids, str):
        return render(request, TEMPLATE, {**context, "error": ids}, status=400)
    runs = runs_for_compare(list(ids))
    # another team's run is as a missing one
    missing = [str(i) for i in ids if i not in runs or not may_see(request.user, runs[i])]
    if missing:
        error = f"No such run: {', '.join(dict.fromkeys(missing))}."
        return render(request, TEMPLATE, {**context, "error": error}, status=404)
    compared = run_compare(runs[ids[0]], runs[ids[1]])
    return render(request, TEMPLATE, {**context, "c": compared})
