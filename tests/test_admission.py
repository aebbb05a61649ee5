"""awaken_site/admission.py: a bounded number of requests in the views at once; a streamed
response gives its place up with its headers."""

from __future__ import annotations

import asyncio
import time

from awaken_site.admission import with_admission


def run_requests(settings, limit: int, count: int, *, stream_seconds: float = 0.0) -> int:
    settings.AWAKEN_WEB_CONCURRENT_VIEWS = limit
    in_view = 0
    most = 0

    async def django(scope, receive, send) -> None:
        nonlocal in_view, most
        in_view += 1
        most = max(most, in_view)
        await asyncio.sleep(0.02)  # the view's work
        in_view -= 1
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await asyncio.sleep(stream_seconds)  # a streamed body
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    app = with_admission(django)

    async def send(message) -> None:
        return None

    async def main() -> None:
        await asyncio.gather(*(app({"type": "http"}, None, send) for _ in range(count)))

    asyncio.run(main())
    return most


def test_at_most_the_limit_of_requests_are_in_their_views(settings) -> None:
    assert run_requests(settings, limit=3, count=20) == 3


def test_streams_do_not_hold_a_place(settings) -> None:
    """Ten streams of 2 s each with a limit of 2: all in a fraction of a second each, so
    the whole takes about one stream's length, not five."""
    started = time.monotonic()
    run_requests(settings, limit=2, count=10, stream_seconds=2.0)
    assert time.monotonic() - started < 4


def test_zero_means_no_limit(settings) -> None:
    assert run_requests(settings, limit=0, count=20) == 20
