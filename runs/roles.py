"""The three roles and what each may do (used by the roles migration and by tests)."""

from __future__ import annotations

VIEW = [
    ("runs", "view_run"),
    ("runs", "view_thread"),
    ("runs", "view_message"),
    ("runs", "view_toolcall"),
    ("runs", "view_ticket"),
    ("runs", "view_decision"),
    ("runs", "view_runevent"),
    ("runs", "view_auditentry"),
    ("agents", "view_agent"),
    ("agents", "view_agentversion"),
    ("agents", "view_model"),
    ("agents", "view_modelprovider"),
    ("agents", "view_note"),
]
OPERATE = [
    ("runs", "start_run"),
    ("runs", "cancel_run"),
    ("runs", "retry_run"),
    ("runs", "decide_ticket"),
]
CONFIGURE = [
    (app, f"{verb}_{model}")
    for app, model in [
        ("agents", "agent"),
        ("agents", "model"),
        ("agents", "modelprovider"),
    ]
    for verb in ("add", "change", "delete")
]

ROLES: dict[str, list[tuple[str, str]]] = {
    "viewer": VIEW,
    "operator": VIEW + OPERATE,
    "admin": VIEW + OPERATE + CONFIGURE,
}
