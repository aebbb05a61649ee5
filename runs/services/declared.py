"""Wiring declared in the settings: lists of dotted paths (the effects of a run's end,
the sweep's steps, the embedded mode's parts, the database gauges) that the core calls
without importing the apps above it that provide them (runs/README.md, "Wiring").

Each list is imported once per process, in its declared order, and again after a test
changes the setting."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string


@functools.cache
def declared(setting: str) -> tuple[Callable[..., Any], ...]:
    """The callables the setting `setting` names, in its order."""
    return tuple(import_string(path) for path in getattr(settings, setting))


@receiver(setting_changed)
def _reload(*, setting: str, **kwargs: Any) -> None:
    declared.cache_clear()
