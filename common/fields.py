"""Model fields more than one app declares."""

from __future__ import annotations

from django.core.validators import MinValueValidator
from django.db import models


def usd_per_million_tokens(help_text: str) -> models.DecimalField:
    """A token price (a model's, or the one a run kept); null: not priced."""
    return models.DecimalField(
        max_digits=12,
        decimal_places=4,
        null=True,
        blank=True,
        validators=[MinValueValidator(0)],
        help_text=help_text,
    )
