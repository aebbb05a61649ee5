"""The words of the scale data set's messages: a small vocabulary of requests and replies
that SQL picks from with a hash, the common search word in ~40 % of the messages and the
rare one where asked."""

from __future__ import annotations

from bench.scale_data.dataset import COMMON_WORD, RARE_WORD
from bench.scale_data.sql import sql_array

OPENERS = ("Please", "Could you", "Can you", "I need you to", "Kindly", "We should")
VERBS = (
    "check",
    "update",
    "summarize",
    "draft",
    "review",
    "send",
    "schedule",
    "cancel",
    "approve",
    "find",
    "compare",
    "archive",
)
DONE_VERBS = (
    "checked",
    "updated",
    "summarized",
    "drafted",
    "reviewed",
    "sent",
    "scheduled",
    "cancelled",
    "approved",
    "found",
    "compared",
    "archived",
)
NOUNS = (
    "the quarterly report",
    "the shipping label",
    "the refund request",
    "the meeting notes",
    "the contract renewal",
    "the travel booking",
    "the expense claim",
    "the customer email",
    "the release checklist",
    "the onboarding plan",
    "the pricing sheet",
    "the backup logs",
    "the support ticket",
    "the lunch menu",
    "the team calendar",
)
TAILS = (
    "for tomorrow",
    "before Friday",
    "by end of day",
    "for the Berlin office",
    "for our biggest customer",
    "when you have a moment",
    "as discussed yesterday",
    "and let me know",
    "with the latest numbers",
    "for the board meeting",
)
FOLLOW_UPS = (
    "",
    " Thanks!",
    "",
    " The client is waiting on this.",
    "",
    " Keep it short.",
    "",
    " Copy the finance team.",
    "",
    " It is not urgent.",
    "",
    " Use the new template.",
    "",
    " Ping me when it is done.",
    "",
    " Mark it as high priority.",
)
REPLIES = ("Done: I", "Sure, I", "I checked and", "Here is the update: I", "Okay, I")


def message_text_sql(h: str, seq: str, rare: str) -> str:
    """SQL for a message's text from a 60-bit hash `h`: a user request (odd seq) or an
    assistant reply (even seq), the common word in ~40 % of them, the rare word where
    `rare` holds."""
    user = (
        f"({sql_array(OPENERS)})[1 + mod({h}, 6)] || ' ' || ({sql_array(VERBS)})[1 + mod({h} / 6, 12)]"
        f" || ' ' || ({sql_array(NOUNS)})[1 + mod({h} / 72, 15)] || ' '"
        f" || ({sql_array(TAILS)})[1 + mod({h} / 1080, 10)] || '.'"
        f" || ({sql_array(FOLLOW_UPS)})[1 + mod({h} / 10800, 16)]"
    )
    reply = (
        f"({sql_array(REPLIES)})[1 + mod({h}, 5)] || ' ' || ({sql_array(DONE_VERBS)})[1 + mod({h} / 6, 12)]"
        f" || ' ' || ({sql_array(NOUNS)})[1 + mod({h} / 72, 15)] || ' '"
        f" || ({sql_array(TAILS)})[1 + mod({h} / 1080, 10)] || '.'"
    )
    return (
        f"CASE WHEN mod({seq}, 2) = 1 THEN {user} ELSE {reply} END"
        f" || CASE WHEN mod({h} / 172800, 100) < 40 THEN ' Also check the {COMMON_WORD} number.'"
        f" ELSE '' END"
        f" || CASE WHEN {rare} THEN ' The {RARE_WORD} charter needs a quote too.' ELSE '' END"
    )
