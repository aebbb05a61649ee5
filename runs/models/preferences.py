"""What each operator chose for how pages look to them: the time display."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class OperatorPreference(models.Model):
    """One row per user, made the first time they change a preference; without one a
    page uses the defaults (relative times)."""

    class TimeDisplay(models.TextChoices):
        RELATIVE = "relative", "Relative"
        LOCAL = "local", "Local time"
        UTC = "utc", "UTC"

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="operator_preference",
        help_text="Whose preferences these are.",
    )
    time_display = models.CharField(
        max_length=10,
        choices=TimeDisplay.choices,
        default=TimeDisplay.RELATIVE,
        help_text="How pages show a moment: relative (3 minutes ago), the browser's local "
        "time, or UTC.",
    )

    def __str__(self) -> str:
        return f"{self.user_id}: {self.time_display}"
