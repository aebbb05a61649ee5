"""The three roles and what each may do. A role group (viewer, operator, admin) grants
its role site-wide, in every team; a team membership grants it in that team only
(common/access.py). Used by the roles migrations, the access backend and tests."""

from __future__ import annotations

from typing import Any

from django.apps import apps as django_apps
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
    ("replays", "view_replayset"),
    ("operations", "view_notificationchannel"),
    ("operations", "view_notificationrule"),
    ("operations", "view_failuregroup"),
    ("operations", "view_budget"),
    ("common", "view_auditentry"),
    ("agents", "view_agent"),
    ("agents", "view_agentversion"),
    ("agents", "view_model"),
    ("agents", "view_modelprovider"),
    ("agents", "view_remoteendpoint"),
    ("agents", "view_mcpserver"),
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
    ("operations", "change_failuregroup"),  # resolve, ignore, reopen
    ("runs", "add_schedule"),  # an operator creates, changes, pauses, resumes and
    ("runs", "change_schedule"),  # runs now its teams' schedules; deleting one is an
    ("runs", "run_schedule"),  # admin's (CONFIGURE)
]
CONFIGURE = [
    (app, f"{verb}_{model}")
    for app, model in [
        ("agents", "agent"),
        ("agents", "model"),
        ("agents", "modelprovider"),
        ("agents", "remoteendpoint"),
        ("agents", "mcpserver"),
        ("operations", "notificationchannel"),
        ("operations", "notificationrule"),
        ("operations", "budget"),
    ]
    for verb in ("add", "change", "delete")
] + [
    ("runs", "delete_schedule"),
    ("operations", "view_notificationdelivery"),
    ("replays", "replay_runs"),
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


def _model_name(app_label: str, codename: str) -> str | None:
    """The model a permission is on, from the installed app's models (their default and
    Meta permissions); None for an app or a permission the code no longer has."""
    try:
        models = django_apps.get_app_config(app_label).get_models()
    except LookupError:
        return None
    for model in models:
        opts = model._meta
        codenames = {f"{action}_{opts.model_name}" for action in opts.default_permissions}
        if codename in codenames | {name for name, _ in opts.permissions}:
            return opts.model_name
    return None


def _historical_label(apps: Any, app_label: str, model_name: str) -> str | None:
    """The app label a model has in a migration's historical state: its own, or the one
    it had before its app took it over (`runs`, for the domain apps' models); None if it
    is not there yet."""
    labels = [app_config.label for app_config in apps.get_app_configs()]
    for label in sorted(labels, key=lambda label: label != app_label):
        if model_name in apps.get_app_config(label).models:
            return label
    return None


def sync_roles(apps: Any) -> None:
    """Create the role groups (and any missing permissions) and grant what ROLES lists;
    used by the roles migrations with their historical app registry. A permission is
    looked up under the label its model has in that registry, so a role migration written
    before a model moved to another app grants it there, and the content type's move
    carries the grant along; a model not in the registry yet is granted by a later one."""
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for name, perms in ROLES.items():
        group, _ = Group.objects.get_or_create(name=name)
        for app_label, codename in perms:
            model_name = _model_name(app_label, codename)
            label = _historical_label(apps, app_label, model_name) if model_name else None
            if label is None:
                continue  # a model (or an app, `common`) a later migration brings in
            permission = Permission.objects.filter(
                content_type__app_label=label,
                content_type__model=model_name,
                codename=codename,
            ).first()
            if permission is not None:
                group.permissions.add(permission)
