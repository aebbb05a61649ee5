"""The admin of operations: registered by importing its modules."""

from runs.operations import admin_budgets, admin_notifications, admin_schedules  # noqa: F401
