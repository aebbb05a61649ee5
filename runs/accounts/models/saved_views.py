"""What operators keep for themselves: saved views of the runs list and the inbox."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class SavedView(models.Model):
    """A named filter of a list page (its query string), per user."""

    class Page(models.TextChoices):
        RUNS = "runs"
        INBOX = "inbox"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="saved_views",
        help_text="Whose view it is.",
    )
    page = models.CharField(max_length=10, choices=Page.choices, help_text="runs or inbox.")
    name = models.CharField(max_length=100, help_text="Shown in the page's list of views.")
    query = models.CharField(
        max_length=2000, blank=True, help_text="The page's query string (its filters)."
    )
    created_at = models.DateTimeField(default=timezone.now, help_text="Saved at.")

    class Meta:
        app_label = "accounts"
        db_table = "runs_savedview"  # its table from when it was the core's
        ordering = ["page", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "page", "name"], name="savedview_unique_user_page_name"
            )
        ]

    def __str__(self) -> str:
        return f"{self.page}: {self.name}"
