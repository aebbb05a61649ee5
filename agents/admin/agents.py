"""Admin for agents: the draft's form (validated; its forms are in `agent_forms`), validate /
publish, version history with diffs and restore, and the permission rules editor with its
preview."""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Max, Q
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.views.decorators.http import require_http_methods

from agents.admin.agent_forms import (
    AgentAdminForm,
    DefaultBehaviorForm,
    PreviewForm,
    RuleFormSet,
    rules_from_formset,
    rules_initial,
)
from agents.admin.base import TeamAdmin, TeamScoped, freeze_message
from agents.errors import AgentConfigInvalid
from agents.models import Agent, Note
from agents.selectors import (
    agent_version_before,
    agent_version_by_number,
    agent_version_latest,
    agent_versions,
)
from agents.services.agents import (
    agent_draft_status,
    agent_permission_update,
    agent_publish,
    agent_publish_errors,
    agent_restore,
    agent_spec,
    spec_normalized,
)
from agents.services.permissions import permission_preview
from common.access import visible_teams
from common.errors import ServiceError

# -- version diffs -------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldDiff:
    field: str
    before: str
    after: str
    lines: list[tuple[str, str]]  # (kind: "add" | "del" | "ctx" | "hunk", text)


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def spec_diff(before: dict[str, Any] | None, after: dict[str, Any]) -> list[FieldDiff]:
    """Field-by-field differences between two specs, each with a unified diff of its text."""
    old = spec_normalized(before or {})
    new = spec_normalized(after)
    diffs = []
    for field in [*new, *(key for key in old if key not in new)]:
        if before is not None and old.get(field) == new.get(field):
            continue
        old_text = _text(old.get(field)) if before is not None and field in old else ""
        new_text = _text(new.get(field)) if field in new else ""
        lines: list[tuple[str, str]] = []
        for line in difflib.unified_diff(
            old_text.splitlines(), new_text.splitlines(), lineterm="", n=3
        ):
            if line.startswith(("---", "+++")):
                continue
            kind = {"@": "hunk", "+": "add", "-": "del"}.get(line[:1], "ctx")
            lines.append((kind, line))
        diffs.append(FieldDiff(field, old_text, new_text, lines))
    return diffs


# -- the admin -----------------------------------------------------------------------------


@admin.register(Agent)
class AgentAdmin(TeamAdmin):
    """A team's admins configure its agents; an agent uses its team's models, endpoints
    and delegates, or shared models and endpoints."""

    form = AgentAdminForm
    list_display = ("slug", "name", "team", "model", "endpoint", "latest_version", "updated_at")
    list_select_related = ("team", "model", "endpoint")
    search_fields = ("slug", "name")
    filter_horizontal = ("delegates",)
    team_path = "team"

    def get_form(self, request: Any, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        """The model, endpoint and delegate choices: the agent's team's and shared ones
        (a new agent: those of the teams the user configures), and what it has now."""
        form = super().get_form(request, obj, change, **kwargs)
        teams: Any = [obj.team_id] if obj is not None else None
        if teams is None:
            teams = visible_teams(request.user, self.perm_name("add"))
        if teams is None:
            return form
        current = {
            "model": [obj.model_id] if obj is not None else [],
            "endpoint": [obj.endpoint_id] if obj is not None else [],
            "delegates": list(obj.delegates.values_list("pk", flat=True)) if obj else [],
        }
        allowed = {
            "model": Q(provider__team__in=teams) | Q(provider__team__isnull=True),
            "endpoint": Q(team__in=teams) | Q(team__isnull=True),
            "delegates": Q(team__in=teams),
        }
        for name, choices in allowed.items():
            field = form.base_fields.get(name)
            if field is not None:
                field.queryset = field.queryset.filter(choices | Q(pk__in=current[name]))
        return form

    def get_queryset(self, request: HttpRequest) -> Any:
        return super().get_queryset(request).annotate(_latest=Max("versions__number"))

    @admin.display(description="published", ordering="_latest")
    def latest_version(self, obj: Agent) -> str:
        latest = getattr(obj, "_latest", None)
        return f"v{latest}" if latest else "never"

    def get_urls(self) -> list[Any]:
        def read(view: Any) -> Any:
            return self.admin_site.admin_view(require_http_methods(["GET", "HEAD"])(view))

        def write(view: Any) -> Any:
            return self.admin_site.admin_view(require_http_methods(["GET", "HEAD", "POST"])(view))

        name = f"{self.opts.app_label}_{self.opts.model_name}"
        return [
            path("<int:pk>/validate/", read(self.validate_view), name=f"{name}_validate"),
            path("<int:pk>/publish/", write(self.publish_view), name=f"{name}_publish"),
            path("<int:pk>/versions/", read(self.versions_view), name=f"{name}_versions"),
            path(
                "<int:pk>/versions/draft/diff/",
                read(self.draft_diff_view),
                name=f"{name}_draft_diff",
            ),
            path(
                "<int:pk>/versions/<int:number>/diff/",
                read(self.version_diff_view),
                name=f"{name}_version_diff",
            ),
            path(
                "<int:pk>/versions/<int:number>/restore/",
                write(self.restore_view),
                name=f"{name}_restore",
            ),
            path("<int:pk>/permissions/", write(self.permissions_view), name=f"{name}_permissions"),
            *super().get_urls(),
        ]

    # -- helpers

    def _agent(self, request: HttpRequest, pk: int, *, change: bool = False) -> Agent:
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied  # no agent at all: another team's is not found below
        agent = get_object_or_404(
            self.get_queryset(request).select_related("model", "endpoint"), pk=pk
        )
        if not self.has_view_or_change_permission(request, agent):
            raise PermissionDenied
        if change and not self._may_change(request, agent):
            raise PermissionDenied
        return agent

    def _may_change(self, request: HttpRequest, agent: Agent) -> bool:
        """The user may change the agent, or its team is frozen: then the service refuses,
        saying so."""
        return self.has_change_permission(request, agent) or bool(freeze_message(agent.team_id))

    def _context(
        self, request: HttpRequest, agent: Agent, title: str, **extra: Any
    ) -> dict[str, Any]:
        return {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "original": agent,
            "agent": agent,
            "title": title,
            "status": agent_draft_status(agent),
            "has_change_permission": self.has_change_permission(request, agent),
            **extra,
        }

    def _url(self, view: str, *args: Any) -> str:
        return reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_{view}", args=args)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        rows = self.get_queryset(request)
        agent = rows.filter(pk=object_id).first() if object_id.isdigit() else None
        extra = dict(extra_context or {})
        if agent is not None:
            extra["draft_status"] = agent_draft_status(agent)
        return super().change_view(request, object_id, form_url, extra)

    # -- views

    def validate_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        agent = self._agent(request, pk)
        errors = agent_publish_errors(agent)
        return TemplateResponse(
            request,
            "admin/agents/agent/validate.html",
            self._context(request, agent, f"Validate {agent.slug}", errors=errors),
        )

    @staticmethod
    def _draft_diff(agent: Agent) -> list[FieldDiff]:
        latest = agent_version_latest(agent)
        return spec_diff(latest.spec if latest else None, agent_spec(agent))

    def publish_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        agent = self._agent(request, pk, change=True)
        errors: dict[str, str] = {}
        refusal = ""
        note = ""
        if request.method == "POST":
            note = request.POST.get("note", "")
            try:
                version = agent_publish(agent=agent, actor=self._actor(request), note=note)
            except AgentConfigInvalid as exc:
                refusal = f"Not published: the draft of {agent.slug} is invalid; fix these first."
                errors = {str(k): str(v) for k, v in exc.details.items()}
            except ServiceError as exc:
                refusal = f"Not published: {exc.message}."
            else:
                messages.success(request, f"Published {agent.slug} v{version.number}.")
                return HttpResponseRedirect(self._url("versions", agent.pk))
        else:
            errors = agent_publish_errors(agent)
        return TemplateResponse(
            request,
            "admin/agents/agent/publish.html",
            self._context(
                request,
                agent,
                f"Publish {agent.slug}",
                errors=errors,
                refusal=refusal,
                note=note,
                diff=self._draft_diff(agent),
            ),
        )

    def versions_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        agent = self._agent(request, pk)
        versions = agent_versions(agent)
        return TemplateResponse(
            request,
            "admin/agents/agent/versions.html",
            self._context(request, agent, f"Versions of {agent.slug}", versions=versions),
        )

    def version_diff_view(self, request: HttpRequest, pk: int, number: int) -> HttpResponse:
        agent = self._agent(request, pk)
        version = agent_version_by_number(agent, number)
        if version is None:
            raise Http404(f"{agent.slug} has no version {number}")
        against_raw = request.GET.get("against", "")
        if against_raw:
            if not against_raw.isdigit():
                raise Http404("'against' must be a version number")
            base = agent_version_by_number(agent, int(against_raw))
            if base is None:
                raise Http404(f"{agent.slug} has no version {against_raw}")
        else:
            base = agent_version_before(agent, number)
        return TemplateResponse(
            request,
            "admin/agents/agent/diff.html",
            self._context(
                request,
                agent,
                f"{agent.slug} v{number}",
                left=f"v{base.number}" if base else "nothing (first version)",
                right=f"v{number}",
                version=version,
                diff=spec_diff(base.spec if base else None, version.spec),
            ),
        )

    def draft_diff_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        agent = self._agent(request, pk)
        latest = agent_version_latest(agent)
        return TemplateResponse(
            request,
            "admin/agents/agent/diff.html",
            self._context(
                request,
                agent,
                f"{agent.slug}: draft",
                left=f"v{latest.number}" if latest else "nothing (never published)",
                right="the draft",
                version=None,
                diff=self._draft_diff(agent),
            ),
        )

    def restore_view(self, request: HttpRequest, pk: int, number: int) -> HttpResponse:
        agent = self._agent(request, pk, change=True)
        version = agent_version_by_number(agent, number)
        if version is None:
            raise Http404(f"{agent.slug} has no version {number}")
        if request.method == "POST":
            try:
                agent_restore(version=version, actor=self._actor(request))
            except ServiceError as exc:
                messages.error(request, exc.message)
                return HttpResponseRedirect(self._url("versions", agent.pk))
            messages.success(
                request, f"Restored v{number} as the draft of {agent.slug}; publish it to use it."
            )
            return HttpResponseRedirect(reverse("admin:agents_agent_change", args=[agent.pk]))
        return TemplateResponse(
            request,
            "admin/agents/agent/restore.html",
            self._context(
                request,
                agent,
                f"Restore {agent.slug} v{number} as the draft",
                version=version,
                diff=spec_diff(agent_spec(agent), version.spec),
            ),
        )

    def permissions_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        agent = self._agent(request, pk)
        permission = agent.permission if isinstance(agent.permission, dict) else {}
        default_initial = {"default_behavior": permission.get("default_behavior") or "ask"}
        if request.method == "POST":
            if not self._may_change(request, agent):
                raise PermissionDenied
            formset = RuleFormSet(request.POST, prefix="rules")
            default_form = DefaultBehaviorForm(request.POST)
            if formset.is_valid() and default_form.is_valid():
                new = {
                    "default_behavior": default_form.cleaned_data["default_behavior"],
                    "rules": rules_from_formset(formset),
                }
                try:
                    agent_permission_update(agent=agent, permission=new, actor=self._actor(request))
                except ServiceError as exc:
                    messages.error(request, exc.message)
                else:
                    messages.success(
                        request,
                        f"Saved {len(new['rules'])} permission rule(s) into the draft; "
                        "publish to use them in runs.",
                    )
                    return HttpResponseRedirect(self._url("permissions", agent.pk))
        else:
            formset = RuleFormSet(initial=rules_initial(permission), prefix="rules")
            default_form = DefaultBehaviorForm(initial=default_initial)
        preview_form = PreviewForm(request.GET or None)
        previews = []
        if preview_form.is_bound and preview_form.is_valid():
            tool = preview_form.cleaned_data["tool"].strip()
            arguments = preview_form.cleaned_data["arguments"]
            previews.append(permission_preview(agent_spec(agent), tool, arguments, source="draft"))
            latest = agent_version_latest(agent)
            if latest is not None:
                previews.append(
                    permission_preview(
                        spec_normalized(latest.spec), tool, arguments, source=f"v{latest.number}"
                    )
                )
        return TemplateResponse(
            request,
            "admin/agents/agent/permissions.html",
            self._context(
                request,
                agent,
                f"Permission rules of {agent.slug}",
                formset=formset,
                default_form=default_form,
                preview_form=preview_form,
                previews=previews,
                published=agent_version_latest(agent),
            ),
        )


@admin.register(Note)
class NoteAdmin(TeamScoped, admin.ModelAdmin):
    team_path = "run__agent__team"  # the team of the run that wrote it
    empty_is_shared = False
    list_display = ("title", "run", "tool_call_id", "created_at")
    list_select_related = ("run",)
    search_fields = ("title", "body")
    readonly_fields = ("run", "tool_call_id", "created_at")
