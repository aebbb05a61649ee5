from __future__ import annotations

import pytest
from django.core.cache import caches

from common.api.auth import THROTTLE_CACHE


@pytest.fixture(autouse=True)
def _fresh_throttle():
    caches[THROTTLE_CACHE].clear()
    yield
    caches[THROTTLE_CACHE].clear()
