"""What runs: agents (the row is the editable draft) and their published versions, model
providers and models, remote endpoints, and the notes written by the `write_note` tool."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models

from agents import secrets
from common.fields import usd_per_million_tokens
from common.models import default_team_id

SLUG = RegexValidator(
    r"^[a-z0-9][a-z0-9_-]{0,62}$",
    "Use 1-63 lowercase letters, digits, '-' or '_', starting with a letter or digit.",
)


class Health(models.TextChoices):
    UNKNOWN = "unknown", "Not checked yet"
    HEALTHY = "healthy", "Healthy"
    FAILING = "failing", "Failing"


class Configured(models.Model):
    """A configuration row admins name by its slug: listed by it, shown as it, timestamped."""

    slug: str  # each subclass declares the field, with its own help text
    created_at = models.DateTimeField(auto_now_add=True, help_text="When it was added.")
    updated_at = models.DateTimeField(auto_now=True, help_text="Last change.")

    class Meta:
        abstract = True
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class HealthFields(models.Model):
    """The outcome of the last connection check or call (providers and endpoints)."""

    health = models.CharField(
        max_length=10, choices=Health.choices, default=Health.UNKNOWN, editable=False
    )
    health_error = models.TextField(blank=True, editable=False, help_text="Last error, if any.")
    health_checked_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        abstract = True


class ProviderKind(models.TextChoices):
    SCRIPTED = "scripted", "Scripted (deterministic, no network)"
    OPENAI = "openai", "OpenAI-compatible Chat Completions"


class ModelProvider(Configured, HealthFields):
    Kind = ProviderKind

    slug = models.CharField(max_length=63, unique=True, validators=[SLUG], help_text="Provider id.")
    name = models.CharField(max_length=200, help_text="Shown to admins.")
    team = models.ForeignKey(
        "common.Team",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="providers",
        help_text="Team whose admins configure it; empty: shared, site-wide admins only.",
    )
    kind = models.CharField(
        max_length=20, choices=Kind.choices, default=Kind.SCRIPTED, help_text="Client to use."
    )
    base_url = models.URLField(blank=True, help_text="API base URL (OpenAI-compatible providers).")
    api_key_env = models.CharField(
        max_length=100,
        blank=True,
        help_text="Name of the environment variable holding the API key (if not stored here).",
    )
    # Write-only: set through set_api_key(), never shown; excluded from forms and audit.
    api_key_encrypted = models.TextField(blank=True, editable=False)
    headers = models.JSONField(
        default=dict, blank=True, help_text='Extra HTTP headers, e.g. {"OpenAI-Organization": "…"}.'
    )
    timeout_seconds = models.FloatField(
        default=300, validators=[MinValueValidator(0.1)], help_text="Per-request timeout."
    )

    def set_api_key(self, value: str) -> None:
        self.api_key_encrypted = secrets.encrypt(value)

    @property
    def has_stored_api_key(self) -> bool:
        return bool(self.api_key_encrypted)

    def stored_api_key(self) -> str:
        """The key saved in the row (decrypted), or "". Runs use
        `agents.providers.resolve_api_key`, which falls back to `api_key_env`."""
        return secrets.decrypt(self.api_key_encrypted) if self.api_key_encrypted else ""


class Model(models.Model):
    slug = models.CharField(
        max_length=63, unique=True, validators=[SLUG], help_text="Model id agents refer to."
    )
    provider = models.ForeignKey(
        ModelProvider, on_delete=models.PROTECT, related_name="models", help_text="Who serves it."
    )
    upstream_model = models.CharField(
        max_length=200, blank=True, help_text="The provider's model name (OpenAI-compatible)."
    )
    context_window = models.PositiveIntegerField(
        null=True, blank=True, help_text="Max context tokens, if known."
    )
    input_price_per_million_usd = usd_per_million_tokens(
        "USD per million input tokens (runs show a cost when set)."
    )
    output_price_per_million_usd = usd_per_million_tokens("USD per million output tokens.")
    script = models.JSONField(
        default=list,
        blank=True,
        help_text=(
            "Scripted models: a list of turns {text?, tool_calls?: [{name, arguments, id?}], "
            "delay?, error?}; empty = the demo policy."
        ),
    )
    created_at = models.DateTimeField(auto_now_add=True, help_text="When it was added.")

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    def clean(self) -> None:
        if not isinstance(self.script, list):
            raise ValidationError({"script": "The script must be a list of turns."})
        for index, turn in enumerate(self.script):
            if not isinstance(turn, dict):
                raise ValidationError({"script": f"Turn {index + 1} must be an object."})
            for call in turn.get("tool_calls") or []:
                if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                    raise ValidationError(
                        {"script": f"Turn {index + 1}: each tool call needs a 'name'."}
                    )


class RemoteEndpoint(Configured, HealthFields):
    """A remote agent reached over a protocol backend; only `a2a` exists."""

    class Backend(models.TextChoices):
        A2A = "a2a", "A2A (Agent2Agent)"

    slug = models.CharField(max_length=63, unique=True, validators=[SLUG], help_text="Endpoint id.")
    name = models.CharField(max_length=200, help_text="Shown to admins and operators.")
    team = models.ForeignKey(
        "common.Team",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="endpoints",
        help_text="Team whose admins configure it; empty: shared, site-wide admins only.",
    )
    backend = models.CharField(
        max_length=20, choices=Backend.choices, default=Backend.A2A, help_text="Protocol."
    )
    base_url = models.URLField(help_text="The remote agent's base URL.")
    # Write-only bearer token: set through set_token(), never shown; excluded from audit.
    token_encrypted = models.TextField(blank=True, editable=False)
    target = models.CharField(
        max_length=200, blank=True, help_text="Remote agent / tenant path segment, if any."
    )
    timeout_ms = models.PositiveIntegerField(
        default=300_000, validators=[MinValueValidator(1)], help_text="Whole-task timeout."
    )
    poll_interval_ms = models.PositiveIntegerField(
        default=2000, validators=[MinValueValidator(10)], help_text="Task polling interval."
    )
    history_length = models.PositiveIntegerField(
        null=True, blank=True, help_text="Messages of task history to ask for (A2A option)."
    )

    def set_token(self, value: str) -> None:
        self.token_encrypted = secrets.encrypt(value)

    @property
    def has_token(self) -> bool:
        return bool(self.token_encrypted)

    def token(self) -> str:
        return secrets.decrypt(self.token_encrypted)


class Agent(Configured):
    """The editable draft of an agent. Runs never read it directly: they pin a published
    AgentVersion (publish freezes the draft). Its configuration is validated by
    `agents.services.agents.agent_validate` (the admin form and publishing call it), not
    by `clean()`: it needs the tool registry and the other agents."""

    slug = models.CharField(
        max_length=63, unique=True, validators=[SLUG], help_text="Agent id (used in tool names)."
    )
    name = models.CharField(max_length=200, help_text="Shown to operators.")
    team = models.ForeignKey(
        "common.Team",
        on_delete=models.PROTECT,
        default=default_team_id,
        related_name="agents",
        help_text="Team that sees its runs and configures it.",
    )
    description = models.TextField(blank=True, help_text="What it does; offered to delegators.")
    model = models.ForeignKey(
        Model,
        on_delete=models.PROTECT,
        related_name="agents",
        null=True,
        blank=True,
        help_text="Model it calls (local agents).",
    )
    endpoint = models.ForeignKey(
        RemoteEndpoint,
        on_delete=models.PROTECT,
        related_name="agents",
        null=True,
        blank=True,
        help_text="Remote endpoint that runs it instead of a local model (remote agents).",
    )
    system_prompt = models.TextField(blank=True, help_text="System prompt sent on every inference.")
    tools = models.JSONField(default=list, blank=True, help_text="Names of registry tools offered.")
    permission = models.JSONField(
        default=dict,
        blank=True,
        help_text=(
            'Permission rules: {"default_behavior": "allow|ask|deny", '
            '"rules": [{"tool": "<pattern>", "behavior": "allow|ask|deny"}]}.'
        ),
    )
    max_rounds = models.PositiveIntegerField(
        default=16, help_text="Stop after this many inferences (0 disables)."
    )
    stop_conditions = models.JSONField(
        default=list,
        blank=True,
        help_text=(
            "Extra stop policies: [{type: timeout, seconds}, {type: token_budget, max_total}, "
            "{type: consecutive_errors, max}]."
        ),
    )
    ticket_deadline_seconds = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Tickets not decided within this many seconds get the default action.",
    )
    ticket_default_action = models.CharField(
        max_length=10,
        choices=[("reject", "reject"), ("approve", "approve"), ("respond", "respond")],
        default="reject",
        help_text="Applied by the system when a ticket's deadline passes.",
    )
    ticket_default_response = models.JSONField(
        null=True,
        blank=True,
        help_text="The answer the system gives when the default action is respond.",
    )
    ticket_warning_seconds = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Warn (notification ticket.deadline_near) this many seconds before a "
        "ticket's deadline; empty: no warning.",
    )
    delegates = models.ManyToManyField(
        "self",
        symmetrical=False,
        blank=True,
        related_name="delegators",
        help_text="Agents it may call as tools agent_run_<id>.",
    )


class AgentVersion(models.Model):
    """An immutable snapshot of an agent's configuration; a run pins the one it started with."""

    agent = models.ForeignKey(
        Agent, on_delete=models.CASCADE, related_name="versions", help_text="Agent versioned."
    )
    number = models.PositiveIntegerField(help_text="1, 2, 3 … per agent.")
    spec = models.JSONField(help_text="Frozen configuration (model, prompt, tools, rules, limits).")
    note = models.CharField(max_length=500, blank=True, help_text="Why it was published.")
    published_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="Who published it (empty: the system).",
    )
    created_at = models.DateTimeField(auto_now_add=True, help_text="When it was published.")
    draft = models.BooleanField(
        default=False,
        help_text="A snapshot of the draft a fork or a replay runs on: never published, "
        "never pinned by new runs; its number is the published version it is based on.",
    )

    class Meta:
        ordering = ["agent", "-number"]
        constraints = [
            models.UniqueConstraint(
                fields=["agent", "number"],
                condition=models.Q(draft=False),
                name="agentversion_unique_number",
            )
        ]

    def __str__(self) -> str:
        return f"{self.agent.slug} v{self.number}" + (" draft" if self.draft else "")

    @property
    def spec_dict(self) -> dict[str, Any]:
        return dict(self.spec)


class Note(models.Model):
    """Written by the `write_note` tool: a real side effect worth approving."""

    title = models.CharField(max_length=200, help_text="Note title.")
    body = models.TextField(blank=True, help_text="Note text.")
    run = models.ForeignKey(
        "runs.Run",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="notes",
        help_text="Run whose tool call wrote it.",
    )
    tool_call_id = models.CharField(
        max_length=200, blank=True, help_text="Tool call that wrote it (idempotency key)."
    )
    created_at = models.DateTimeField(auto_now_add=True, help_text="When it was written.")

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # A replayed tool call (worker killed after the write) must not write twice.
            models.UniqueConstraint(
                fields=["run", "tool_call_id"],
                condition=~models.Q(tool_call_id=""),
                name="note_unique_per_tool_call",
            )
        ]

    def __str__(self) -> str:
        return self.title
