"""The models of accounts, under the `accounts` app label. Their tables keep the names
they had as the run core's (runs_<model>, Meta.db_table)."""

from runs.accounts.models.saved_views import SavedView

__all__ = [
    "SavedView",
]
