"""Teams in the Django admin (site-wide admins and superusers only). Every change goes
through common.teams, so it is audited as on the team pages and the API."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group, User
from django.core.exceptions import PermissionDenied

from common.access import site_wide
from common.audit import audit_record, request_actor
from common.errors import ServiceError
from common.models import Membership, Team
from common.teams import CHANGE_TEAM, membership_remove, membership_set, team_update


def _site_admin(request: Any) -> bool:
    return site_wide(request.user, CHANGE_TEAM)


class PermissionFirstHistory(admin.ModelAdmin):
    """The history page checks the permission before it looks the row up, as the change
    and delete pages do: a row the user may not see answers 403 as an unknown id does
    (Django's history page redirects for an unknown id but refuses an existing row, which
    tells that the row exists)."""

    def history_view(self, request: Any, object_id: str, extra_context: Any = None) -> Any:
        if not self.has_view_or_change_permission(
            request, self.get_object(request, unquote(object_id))
        ):
            raise PermissionDenied
        return super().history_view(request, object_id, extra_context)


def _writable(obj: Any) -> bool:
    """A frozen team's settings and members are read-only until the freeze is lifted."""
    return not (isinstance(obj, Team) and obj.frozen)


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    fields = ("user", "role", "source")
    readonly_fields = ("source",)
    autocomplete_fields = ()

    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        return _writable(obj) and super().has_add_permission(request, obj)

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return _writable(obj) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return _writable(obj) and super().has_delete_permission(request, obj)


@admin.register(Team)
class TeamAdmin(PermissionFirstHistory):
    list_display = ("slug", "name", "reason_required", "bulk_confirm_above", "frozen")
    search_fields = ("slug", "name")
    readonly_fields = ("frozen", "frozen_reason", "frozen_at", "frozen_by")
    fields = ("slug", "name", "reason_required", "bulk_confirm_above", *readonly_fields)
    inlines = [MembershipInline]

    def has_module_permission(self, request: Any) -> bool:
        return _site_admin(request)

    def has_view_permission(self, request: Any, obj: Any = None) -> bool:
        return _site_admin(request)

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return _site_admin(request) and _writable(obj)

    def has_add_permission(self, request: Any) -> bool:
        return _site_admin(request)

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False  # a team's runs and agents point at it: freeze it instead

    def get_readonly_fields(self, request: Any, obj: Any = None) -> Any:
        return ("slug", *self.readonly_fields) if obj is not None else self.readonly_fields

    def save_model(self, request: Any, obj: Team, form: Any, change: bool) -> None:
        actor = request_actor(request, "admin")
        if not change:
            obj.save()
            audit_record(
                actor=actor,
                action="team.create",
                target_type="team",
                target_id=obj.slug,
                team=obj,
                after={"name": obj.name},
            )
            return
        settings = {key: form.cleaned_data[key] for key in form.changed_data if key in SETTINGS}
        if settings:
            team_update(team=obj, actor=actor, **settings)

    def save_formset(self, request: Any, form: Any, formset: Any, change: bool) -> None:
        actor = request_actor(request, "admin")
        team = form.instance
        # what the admin's change message reads (formset.save() would set them)
        formset.new_objects, formset.changed_objects, formset.deleted_objects = [], [], []
        try:
            for row in formset.forms:
                data = getattr(row, "cleaned_data", None) or {}
                instance = row.instance
                if data.get("DELETE") and instance.pk:
                    membership_remove(membership=instance, actor=actor)
                elif data.get("user") and (row.has_changed() or not instance.pk):
                    membership_set(team=team, user=data["user"], role=data["role"], actor=actor)
        except ServiceError as exc:
            messages.error(request, exc.message)


SETTINGS = ("name", "reason_required", "bulk_confirm_above")


# Django's own user and group pages, with the history page checked the same way
admin.site.unregister(User)
admin.site.unregister(Group)


@admin.register(User)
class AccountAdmin(PermissionFirstHistory, UserAdmin):
    pass


@admin.register(Group)
class RoleGroupAdmin(PermissionFirstHistory, GroupAdmin):
    pass
