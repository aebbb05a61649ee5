"""`send_email`: plain-text mail through Django's configured email backend."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import BadHeaderError, send_mail
from django.core.validators import validate_email

from runs.runtime.ports import ToolCallContext
from runs.runtime.types import ToolDescriptor, ToolResult

from .patterns import SINGLE_LINE


class SendEmailTool:
    """Send a plain-text email from DEFAULT_FROM_EMAIL through Django's configured backend."""

    name = "send_email"
    max_recipients = 10

    @property
    def descriptor(self) -> ToolDescriptor:
        return ToolDescriptor(
            name=self.name,
            description=f"Send a plain-text email to 1-{self.max_recipients} recipients.",
            parameters={
                "type": "object",
                "properties": {
                    "to": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": self.max_recipients,
                        "uniqueItems": True,
                        "items": {
                            "type": "string",
                            "format": "email",
                            "minLength": 3,
                            "maxLength": 254,
                            "pattern": SINGLE_LINE,
                        },
                    },
                    "subject": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 200,
                        "pattern": SINGLE_LINE,
                    },
                    "body": {"type": "string", "maxLength": 20_000},
                },
                "required": ["to", "subject", "body"],
                "additionalProperties": False,
            },
        )

    def dry_run(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """What a replay (docs/replays.md) answers instead of sending the mail."""
        return {
            "dry_run": True,
            "would": "send email",
            "to": [str(address).strip() for address in arguments.get("to") or []],
            "subject": arguments.get("subject", ""),
            "body": arguments.get("body", ""),
        }

    def execute(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
        recipients: list[str] = [address.strip() for address in arguments["to"]]
        subject: str = arguments["subject"]
        body: str = arguments.get("body", "")
        invalid = []
        for address in recipients:
            try:
                validate_email(address)
            except ValidationError:
                invalid.append(address)
        if invalid:
            return ToolResult.error(
                self.name, f"Invalid email address(es): {', '.join(repr(a) for a in invalid)}."
            )
        if "\n" in subject or "\r" in subject or not subject.strip():
            return ToolResult.error(self.name, "The subject must be a single non-blank line.")
        try:
            sent = send_mail(
                subject, body, settings.DEFAULT_FROM_EMAIL, recipients, fail_silently=False
            )
        except BadHeaderError as exc:
            return ToolResult.error(self.name, f"Refused to send: {exc}.")
        except OSError as exc:  # includes smtplib.SMTPException and connection errors
            return ToolResult.error(self.name, f"Sending failed: {exc}.")
        return ToolResult.success(self.name, {"sent": sent, "to": recipients})
