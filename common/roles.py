"""The three roles and what each may do. A role group (viewer, operator, admin) grants
its role site-wide, in every team; a team membership grants it in that team only
(common/access.py). Used by the roles migrations, the access backend and tests."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.management import create_permissions

VIEW = [
    ("runs", "view_run"),
    ("runs", "view_thread"),
    ("runs", "view_message"),
    ("runs", "view_toolcall"),
    ("runs", "view_ticket"),
    ("runs", "view_decision"),
    ("runs", "view_runevent"),
    ("runs", "view_pendinginput"),
    ("runs", "view_backgroundtask"),
    ("runs", "view_schedule"),
    ("runs", "view_replayset"),
    ("runs", "view_notificationchannel"),
    ("runs", "view_notificationrule"),
    ("runs", "view_failuregroup"),
    ("common", "view_auditentry"),
    ("agents", "view_agent"),
    ("agents", "view_agentversion"),
    ("agents", "view_model"),
    ("agents", "view_modelprovider"),
    ("agents", "view_remoteendpoint"),
    ("agents", "view_note"),
    ("common", "view_team"),
]
OPERATE = [
    ("runs", "start_run"),
    ("runs", "cancel_run"),
    ("runs", "retry_run"),
    ("runs", "decide_ticket"),
    ("runs", "prioritize_run"),
    ("runs", "edit_pendinginput"),
    ("runs", "change_failuregroup"),  # resolve, ignore, reopen
]
CONFIGURE = [
    (app, f"{verb}_{model}")
    for app, model in [
        ("agents", "agent"),
        ("agents", "model"),
        ("agents", "modelprovider"),
        ("agents", "remoteendpoint"),
        ("runs", "schedule"),
        ("runs", "notificationchannel"),
        ("runs", "notificationrule"),
    ]
    for verb in ("add", "change", "delete")
] + [
    ("runs", "run_schedule"),
    ("runs", "view_notificationdelivery"),
    ("runs", "replay_runs"),
    ("common", "change_team"),  # the team's settings, freeze and members
]

ROLES: dict[str, list[tuple[str, str]]] = {
    "viewer": VIEW,
    "operator": VIEW + OPERATE,
    "admin": VIEW + OPERATE + CONFIGURE,
}

# "app_label.codename" strings, as `user.has_perm` takes them
ROLE_PERMS: dict[str, frozenset[str]] = {
    role: frozenset(f"{app}.{codename}" for app, codename in perms) for role, perms in ROLES.items()
}
# what a frozen team still allows: reading, and its admins lifting the freeze
READ_ONLY_PERMS = ROLE_PERMS["viewer"] | {"common.change_team"}


def sync_roles(apps: Any) -> None:
    """Create the role groups (and any missing permissions) and grant what ROLES lists;
    used by the roles migrations with their historical app registry."""
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    installed = {app_config.label for app_config in apps.get_app_configs()}
    for name, perms in ROLES.items():
        group, _ = Group.objects.get_or_create(name=name)
        for app_label, codename in perms:
            if app_label not in installed:
                continue  # an app a later migration brings in (`common`) grants its own
            permission = Permission.objects.filter(
                content_type__app_label=app_label, codename=codename
            ).first()
            if permission is not None:  # else a model a later migration adds (and grants)
                group.permissions.add(permission)
