"""Validate Django test-client responses against the served OpenAPI schema."""

from __future__ import annotations

import functools
from typing import Any

import requests
import schemathesis
from django.test import Client
from schemathesis.core.transport import Response


@functools.cache
def api_schema() -> Any:
    response = Client().get("/api/v1/schema/", {"format": "json"})
    assert response.status_code == 200
    return schemathesis.openapi.from_dict(response.json())


def conforms(response: Any, method: str, template: str) -> Any:
    """Assert `response` (a Django response to METHOD template) matches the schema."""
    operation = api_schema()[template][method.upper()]
    request = requests.Request(method.upper(), f"http://testserver{template}").prepare()
    headers: dict[str, list[str]] = {k.lower(): [v] for k, v in response.items()}
    wrapped = Response(
        status_code=response.status_code,
        headers=headers,
        content=response.content,
        request=request,
        elapsed=0.0,
        verify=False,
    )
    operation.validate_response(wrapped)
    return response
