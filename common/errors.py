"""Errors services raise; every surface (CLI, pages, API) maps them the same way."""

from __future__ import annotations

from typing import Any


class ServiceError(Exception):
    code = "error"
    status = 400

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}


class InvalidInput(ServiceError):
    code = "invalid"
    status = 400


class NotFound(ServiceError):
    code = "not_found"
    status = 404


class IllegalTransition(ServiceError):
    code = "conflict"
    status = 409


class DecisionConflict(IllegalTransition):
    """A ticket was already decided (or closed); details name who and when."""

    code = "already_decided"


class Frozen(IllegalTransition):
    """The team is in an incident freeze: nothing of it may change until it is lifted."""

    code = "team_frozen"


class ConfirmationRequired(InvalidInput):
    """A bulk action above the team's threshold was sent without `confirm`."""

    code = "confirmation_required"


class Forbidden(ServiceError):
    """The actor's role in the object's team does not allow the action."""

    code = "forbidden"
    status = 403
