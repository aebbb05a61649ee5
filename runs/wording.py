"""How the pages say what was done: one table of past tenses, so every outcome message
reads the same and a new decision kind cannot be worded by gluing a "d" on its verb."""

from __future__ import annotations

# Decision.Action value -> what the page says once it is done
DECISION_DONE = {
    "approve": "Approved",
    "edit": "Edited and approved",
    "reject": "Rejected",
    "respond": "Answered",
}


def decision_done(action: str, tool_name: str) -> str:
    """The outcome line of a decision, e.g. "Rejected write_note."."""
    return f"{DECISION_DONE.get(action, action)} {tool_name}."
