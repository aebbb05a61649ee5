"""Server processes freeze what start-up loaded and collect the young generation less often."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from django.test import override_settings

from awaken_site import gc_tuning


@pytest.fixture
def restore_gc() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def test_settle_freezes_startup_objects_and_raises_the_young_threshold(restore_gc: None) -> None:
    loaded = [object() for _ in range(10)]
    with override_settings(AWAKEN_GC_GEN0=12_345):
        gc_tuning.settle()
    assert gc.get_freeze_count() >= len(loaded)
    assert gc.get_threshold()[0] == 12_345


def test_zero_leaves_the_collector_alone(restore_gc: None) -> None:
    gc.set_threshold(700, 10, 10)
    with override_settings(AWAKEN_GC_GEN0=0):
        gc_tuning.settle()
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == (700, 10, 10)
