"""The models of replays and forks, under the `replays` app label. Their tables keep the names
they had as the run core's (runs_<model>, Meta.db_table)."""

from runs.replays.models.replays import ReplayItem, ReplaySet

__all__ = [
    "ReplayItem",
    "ReplaySet",
]
