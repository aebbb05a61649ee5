"""Assertions shared by the API tests."""

from __future__ import annotations

from typing import Any


def assert_error(response: Any, status: int, code: str) -> dict[str, Any]:
    """The response is the API's error format with `status` and `code`; returns the error."""
    assert response.status_code == status, (
        response.status_code,
        getattr(response, "content", b"")[:500],
    )
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message", "details"}, body
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert isinstance(body["error"]["details"], dict)
    return body["error"]
