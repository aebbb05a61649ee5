"""Shared admin machinery: every configuration change is audited, and each user sees and
configures only the rows of the teams their role allows (common/access.py).

A row's team is reached through `team_path` (e.g. "team", "provider__team"). A row with
no team is shared (`empty_is_shared`): everyone who may view such rows somewhere sees it,
only site-wide roles change it. A frozen team's rows are read-only for everyone."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.auth import get_permission_codename
from django.db import transaction
from django.db.models import Q, QuerySet
from django.forms.models import model_to_dict

from common.access import frozen_teams, site_wide, visible_teams
from common.audit import Actor, audit_record, request_actor
from common.errors import Frozen
from common.models import Team, default_team_id
from common.teams import ensure_writable

ENCRYPTED_SUFFIX = "_encrypted"


def _snapshot(obj: Any) -> dict[str, Any]:
    """The editable fields, and for each write-only secret (`<name>_encrypted`, not
    editable, so not in model_to_dict) only whether one is stored: `<name>_stored`."""
    data = model_to_dict(obj)
    for field in obj._meta.concrete_fields:
        if field.name.endswith(ENCRYPTED_SUFFIX):
            stored = bool(getattr(obj, field.attname))
            data[f"{field.name.removesuffix(ENCRYPTED_SUFFIX)}_stored"] = stored
    return {
        key: (list(value) if isinstance(value, (set, tuple)) else value)
        for key, value in data.items()
    }


def writable_teams(user: Any, perm: str) -> QuerySet[Team]:
    """The teams, not frozen, in which `user` may `perm`."""
    teams = visible_teams(user, perm)
    rows = Team.objects.filter(frozen=False)
    return rows if teams is None else rows.filter(pk__in=teams)


def team_along(obj: Any, path: str | None) -> int | None:
    """The team id reached from `obj` through `path` ("team", "agent__team"); None when
    a link on the way is empty."""
    if path is None or obj is None:
        return None
    *hops, last = path.split("__")
    for hop in hops:
        obj = getattr(obj, hop, None)
        if obj is None:
            return None
    if isinstance(obj, Team):
        return obj.pk
    return getattr(obj, f"{last}_id", None)


def freeze_message(team: int | None) -> str:
    """The freeze's message when `team` is frozen, else ""."""
    try:
        ensure_writable(team)
    except Frozen as exc:
        return exc.message
    return ""


class TeamScoped:
    """Querysets, object permissions and the app index of a team's rows (a mixin for
    ModelAdmin)."""

    team_path: str | None = "team"  # from the model to its team; None: every row shared
    empty_is_shared = True  # False: a row without a team is seen by site-wide roles only
    opts: Any

    def perm_name(self, action: str) -> str:
        return f"{self.opts.app_label}.{get_permission_codename(action, self.opts)}"

    def team_of(self, obj: Any) -> int | None:
        return team_along(obj, self.team_path)

    def visible_q(self, user: Any) -> Q | None:
        """The rows `user` may see (None: all)."""
        if self.team_path is None:
            return None
        teams = visible_teams(user, self.perm_name("view"))
        if teams is None:
            return None
        shown = Q(**{f"{self.team_path}__in": teams})
        if self.empty_is_shared:
            shown |= Q(**{f"{self.team_path}__isnull": True})
        return shown

    def get_queryset(self, request: Any) -> Any:
        queryset = super().get_queryset(request)  # type: ignore[misc]
        shown = self.visible_q(request.user)
        return queryset if shown is None else queryset.filter(shown)

    def may(self, request: Any, action: str, obj: Any = None) -> bool:
        """May the user `action` (view, add, change, delete) `obj` (None: some row)?"""
        user, perm = request.user, self.perm_name(action)
        if obj is None:
            return bool(user.has_perm(perm))
        team = self.team_of(obj)
        if team is None:
            if action == "view" and self.empty_is_shared:
                return bool(user.has_perm(perm))
            return site_wide(user, perm)
        if action != "view" and team in frozen_teams(user):
            return False  # even superusers wait for the freeze to be lifted
        return bool(user.has_perm(perm, team))

    def has_view_permission(self, request: Any, obj: Any = None) -> bool:
        return self.may(request, "view", obj) or self.may(request, "change", obj)

    def has_module_permission(self, request: Any) -> bool:
        """Team roles count too (Django's check reads only the site-wide ones)."""
        label = f"{self.opts.app_label}."
        return bool(request.user.has_module_perms(self.opts.app_label)) or any(
            perm.startswith(label) for perm in request.user.get_all_permissions()
        )


class VisibleRelatedFilter(admin.RelatedFieldListFilter):
    """A related-row filter offering only the rows the user may see."""

    def field_choices(self, field: Any, request: Any, model_admin: Any) -> Any:
        ordering = self.field_admin_ordering(field, request, model_admin)
        related = model_admin.admin_site._registry.get(field.related_model)
        shown = related.visible_q(request.user) if isinstance(related, TeamScoped) else None
        return field.get_choices(include_blank=False, ordering=ordering, limit_choices_to=shown)


class AuditedAdmin(admin.ModelAdmin):
    """Every configuration change made in the admin lands in the audit log, in the same
    transaction as the change (seen by the members of the row's team)."""

    def _actor(self, request: Any) -> Actor:
        return request_actor(request, "admin")

    def _kind(self) -> str:
        return self.model._meta.model_name or "object"

    def team_of(self, obj: Any) -> int | None:
        return None

    def save_model(self, request: Any, obj: Any, form: Any, change: bool) -> None:
        previous = self.model.objects.get(pk=obj.pk) if change and obj.pk else None
        before = _snapshot(previous) if previous is not None else None
        with transaction.atomic():
            ensure_writable(self.team_of(previous))
            ensure_writable(self.team_of(obj))
            super().save_model(request, obj, form, change)
            audit_record(
                actor=self._actor(request),
                action=f"{self._kind()}.{'update' if change else 'create'}",
                target_type=self._kind(),
                target_id=obj.pk,
                team=self.team_of(obj),
                before=before,
                after=_snapshot(obj),
            )

    def delete_model(self, request: Any, obj: Any) -> None:
        with transaction.atomic():
            ensure_writable(self.team_of(obj))
            audit_record(
                actor=self._actor(request),
                action=f"{self._kind()}.delete",
                target_type=self._kind(),
                target_id=obj.pk,
                team=self.team_of(obj),
                before=_snapshot(obj),
            )
            super().delete_model(request, obj)

    def delete_queryset(self, request: Any, queryset: Any) -> None:
        """The "delete selected" action: each row audited (and its team's freeze obeyed)."""
        with transaction.atomic():
            for obj in queryset:
                self.delete_model(request, obj)


class TeamAdmin(TeamScoped, AuditedAdmin):
    """An audited admin of a team's configuration: its rows are configured by the admins
    of their team; the team (or the row that decides it, e.g. a model's provider) is
    chosen among the teams the user configures."""

    def has_add_permission(self, request: Any) -> bool:
        return self.may(request, "add")

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return self.may(request, "change", obj)

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return self.may(request, "delete", obj)

    # --- the field that decides the team ----------------------------------------------------

    def _owner(self) -> tuple[str, str]:
        """The form field deciding the row's team, and the path from its row to the team."""
        head, _, rest = (self.team_path or "").partition("__")
        return head, rest

    def owner_choices(self, request: Any, related: Any) -> QuerySet:
        """The rows of `related` (the owner field's model) the user may put this row under."""
        teams = writable_teams(request.user, self.perm_name("change"))
        _, rest = self._owner()
        if not rest:
            return teams
        allowed = Q(**{f"{rest}__in": teams})
        if site_wide(request.user, self.perm_name("change")):
            allowed |= Q(**{f"{rest}__isnull": True})
        return related._default_manager.filter(allowed)

    def formfield_for_foreignkey(self, db_field: Any, request: Any, **kwargs: Any) -> Any:
        head, _ = self._owner()
        if self.team_path and db_field.name == head:
            kwargs["queryset"] = self.owner_choices(request, db_field.related_model)
            if db_field.name == "team" and not db_field.null:
                kwargs.update(required=False, empty_label=None)  # kept when not posted
            elif db_field.null and not site_wide(request.user, self.perm_name("change")):
                kwargs.update(required=True, empty_label=None)  # shared: site-wide admins
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def initial_team(self, request: Any) -> int | None:
        """The team a new row starts in: the default team when the user may configure it,
        else the first they may."""
        teams = list(
            writable_teams(request.user, self.perm_name("add")).values_list("pk", flat=True)
        )
        if not teams and not site_wide(request.user, self.perm_name("add")):
            return None
        default = default_team_id()
        return default if default in teams or not teams else teams[0]

    def get_changeform_initial_data(self, request: Any) -> dict[str, Any]:
        initial: dict[str, Any] = dict(super().get_changeform_initial_data(request))
        if self.team_path == "team" and "team" not in initial:
            nullable = self.model._meta.get_field("team").null
            if not (nullable and site_wide(request.user, self.perm_name("add"))):
                initial["team"] = self.initial_team(request)
        return initial

    def get_form(self, request: Any, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form_class = super().get_form(request, obj, change, **kwargs)
        model_admin = self

        class TeamCheckedForm(form_class):  # type: ignore[valid-type,misc]
            def clean(self) -> Any:
                data = super().clean()
                model_admin.check_team(request, self, obj)
                return data

        TeamCheckedForm.__name__ = form_class.__name__
        return TeamCheckedForm

    def check_team(self, request: Any, form: Any, obj: Any) -> None:
        """Refuse, on the form, a row put in a team the user does not configure, a shared
        row from a team admin, and any change in a frozen team (with the freeze's message)."""
        head, rest = self._owner()
        data = form.cleaned_data
        if not self.team_path or head not in form.fields or head in form.errors:
            return
        if head == "team" and data.get(head) is None and not self.model._meta.get_field(head).null:
            # not posted: the row keeps its team, a new one starts in the initial team
            kept = getattr(obj, head) if obj is not None else None
            if kept is None:
                start = self.initial_team(request)
                kept = Team.objects.filter(pk=start).first() if start is not None else None
            data[head] = kept
            if kept is None:
                form.add_error(head, "Choose a team.")
                return
        owner = data.get(head)
        team = team_along(owner, rest or "team")  # a Team is its own team
        perm = self.perm_name("change" if obj is not None else "add")
        if team is None:
            if not site_wide(request.user, perm):
                what = self.opts.verbose_name_plural
                form.add_error(head, f"Only site-wide admins configure shared {what}.")
        elif not request.user.has_perm(perm, team):
            form.add_error(head, "You do not configure this team's rows: choose one of yours.")
        for frozen in {self.team_of(obj) if obj is not None else None, team} - {None}:
            message = freeze_message(frozen)
            if message:
                form.add_error(None, message[:1].upper() + message[1:] + ".")

    def render_change_form(
        self,
        request: Any,
        context: Any,
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Any = None,
    ) -> Any:
        if obj is not None and request.method == "GET":
            message = freeze_message(self.team_of(obj))
            if message:
                messages.warning(request, message[:1].upper() + message[1:] + ".")
        return super().render_change_form(request, context, add, change, form_url, obj)
