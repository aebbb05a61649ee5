"""The models of accounts. They keep the `runs` app label (Meta.app_label):
their tables, migrations, permissions and admin URLs are the run core's."""

from runs.accounts.models.saved_views import SavedView

__all__ = [
    "SavedView",
]
