"""The models of replays and forks. They keep the `runs` app label (Meta.app_label):
their tables, migrations, permissions and admin URLs are the run core's."""

from runs.replays.models.replays import ReplayItem, ReplaySet

__all__ = [
    "ReplayItem",
    "ReplaySet",
]
