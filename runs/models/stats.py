"""Dashboard counters kept with the changes they count."""

from __future__ import annotations

from django.db import models


class HourlyStat(models.Model):
    """Dashboard counters per hour and agent, kept in the transaction of the change they
    count (runs.services.stats), so the dashboard reads a few hundred rows instead of
    scanning runs and tickets.

    Metrics: `run:<outcome>` counts the runs created in that hour by their outcome now
    (open, completed, failed, cancelled, blocked); `wait:<bucket>` counts the tickets
    closed in that hour by how long they waited."""

    hour = models.DateTimeField(help_text="Start of the hour (UTC).")
    agent = models.ForeignKey(
        "agents.Agent", on_delete=models.CASCADE, related_name="+", help_text="Agent counted."
    )
    metric = models.CharField(max_length=40, help_text="run:<outcome> or wait:<bucket>.")
    count = models.BigIntegerField(default=0, help_text="Current value.")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["hour", "agent", "metric"], name="hourlystat_unique_hour_agent_metric"
            )
        ]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H}h {self.agent_id} {self.metric}={self.count}"
