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


class HourlyUsage(models.Model):
    """What runs and tool calls cost and how long they took, per hour and agent, broken
    down by `kind`: the agent itself (`name` empty), the model its runs used (`name`: the
    model's slug, empty for runs without a model), or the tool called (`name`: the tool).
    Kept in the transaction that finishes the run or the tool call (runs.services.stats);
    read by the "cost, tokens and latency" figures (docs/stats.md).

    Metrics: runs and tool calls `runs`, `succeeded`, `in_tokens`, `out_tokens`,
    `cost_nusd` (nano-USD), `dur:<bucket>` (run durations by log-spaced bucket); tool
    calls `calls`, `failed`, `dur:<bucket>` (call latencies)."""

    class Kind(models.TextChoices):
        AGENT = "agent"
        MODEL = "model"
        TOOL = "tool"

    hour = models.DateTimeField(help_text="Start of the hour (UTC) the run or call finished.")
    agent = models.ForeignKey(
        "agents.Agent", on_delete=models.CASCADE, related_name="+", help_text="Agent counted."
    )
    kind = models.CharField(max_length=5, choices=Kind.choices, help_text="What `name` names.")
    name = models.CharField(
        max_length=200, blank=True, help_text="Model slug or tool name; empty for the agent."
    )
    metric = models.CharField(max_length=20, help_text="runs, succeeded, dur:<bucket>, ...")
    count = models.BigIntegerField(default=0, help_text="Current value.")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["hour", "agent", "kind", "name", "metric"],
                name="hourlyusage_unique_key",
            )
        ]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H}h {self.agent_id} {self.kind}:{self.name} {self.metric}"
