"""Serializer fields the API's shapes share."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from runs.models import DEFAULT_PRIORITY, PRIORITY_MAX, PRIORITY_MIN
from runs.services.submission import MODE_ERROR, MODES, Mode, priority_error


def _priority_rule(value: Any) -> None:
    error = priority_error(value)
    if error is not None:
        raise serializers.ValidationError(error)


class PriorityField(serializers.IntegerField):
    """A priority, refused by the submission's rule (runs.services.submission) in its
    words, as on every surface; its bounds stay in the schema."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(validators=[_priority_rule], **kwargs)
        self.min_value, self.max_value = PRIORITY_MIN, PRIORITY_MAX  # for the schema only


def input_priority_field(help_text: str) -> PriorityField:
    """The priority of the run an input starts: the default unless given."""
    return PriorityField(default=DEFAULT_PRIORITY, help_text=help_text)


def input_mode_field(help_text: str) -> serializers.ChoiceField:
    """An input mode (queue unless given), refused in the submission's words."""
    return serializers.ChoiceField(
        choices=list(MODES),
        default=Mode.QUEUE,
        help_text=help_text,
        error_messages={"invalid_choice": MODE_ERROR},
    )
