from django.urls import path

from runs.accounts.views import audit, preferences, saved_view_forms, teams, tokens
from runs.decisions.views import (
    claims,
    email_approvals,
    inbox,
    inbox_policy,
    rules,
    slack_actions,
)
from runs.operations.views import (
    dashboard,
    exports,
    failures,
    notification_channels,
    notification_routes,
    notifications,
    schedules,
    slack_link,
)
from runs.replays.views import compare, forks, replays
from runs.views import actions, detail, lists, run_bulk, trace
from runs.views import thread_control as control

app_name = "runs"

urlpatterns = [
    path("", dashboard.dashboard, name="dashboard"),
    path("dashboard/stats", dashboard.dashboard_stats, name="dashboard-stats"),
    path("dashboard/glance", dashboard.dashboard_glance, name="dashboard-glance"),
    path("runs/", lists.run_list, name="run-list"),
    path("runs/export.csv", exports.runs_export, name="run-list-export"),
    path("runs/compare/", compare.run_compare_page, name="run-compare"),
    path("runs/<uuid:run_id>/export.json", exports.run_export, name="run-export"),
    path("runs/<uuid:run_id>/", detail.run_page, name="run-detail"),
    path("runs/<uuid:run_id>/row", lists.run_row, name="run-row"),
    path("runs/bulk", run_bulk.bulk_runs, name="run-bulk"),
    path("preferences/time", preferences.set_time_display, name="time-display"),
    path(
        "runs/<uuid:run_id>/header",
        detail.run_partial,
        {"template": "run_header"},
        name="run-header",
    ),
    path(
        "runs/<uuid:run_id>/tickets",
        detail.run_partial,
        {"template": "run_tickets"},
        name="run-tickets",
    ),
    path(
        "runs/<uuid:run_id>/transcript",
        detail.run_partial,
        {"template": "run_transcript"},
        name="run-transcript",
    ),
    path(
        "runs/<uuid:run_id>/timeline",
        detail.run_partial,
        {"template": "run_timeline"},
        name="run-timeline",
    ),
    path("runs/<uuid:run_id>/trace", trace.run_trace_partial, name="run-trace"),
    path("runs/<uuid:run_id>/trace/events", trace.run_trace_events, name="run-trace-events"),
    path("runs/<uuid:run_id>/cancel", actions.cancel, name="run-cancel"),
    path("runs/<uuid:run_id>/retry", actions.retry, name="run-retry"),
    path("runs/<uuid:run_id>/fork", forks.fork, name="run-fork"),
    path("runs/<uuid:run_id>/fork/form", forks.fork_form, name="run-fork-form"),
    path("runs/<uuid:run_id>/priority", control.set_priority, name="run-priority"),
    path("tickets/<uuid:ticket_id>/decide", actions.decide, name="ticket-decide"),
    path("tickets/<uuid:ticket_id>/edit-preview", actions.edit_preview, name="ticket-edit-preview"),
    path("tickets/<uuid:ticket_id>/claim", claims.claim, name="ticket-claim"),
    path("tickets/<uuid:ticket_id>/release", claims.release, name="ticket-release"),
    path("tickets/<uuid:ticket_id>/assign", claims.assign, name="ticket-assign"),
    path("tickets/<uuid:ticket_id>/rule", rules.rule_from_decision, name="ticket-rule"),
    path("threads/", lists.thread_list, name="thread-list"),
    path("threads/<uuid:thread_id>/", lists.thread_page, name="thread-detail"),
    path("threads/<uuid:thread_id>/messages", detail.thread_messages, name="thread-messages"),
    path("threads/<uuid:thread_id>/send", actions.send_message, name="thread-send"),
    path("threads/new", actions.send_message, name="thread-new"),
    path("threads/<uuid:thread_id>/inputs", control.thread_inputs, name="thread-inputs"),
    path("threads/<uuid:thread_id>/runs", control.thread_runs, name="thread-runs"),
    path(
        "threads/<uuid:thread_id>/transcript", control.thread_transcript, name="thread-transcript"
    ),
    path("threads/<uuid:thread_id>/interrupt", control.interrupt_thread, name="thread-interrupt"),
    path("inputs/<uuid:input_id>/edit", control.edit_input, name="input-edit"),
    path("inputs/<uuid:input_id>/retract", control.retract_input, name="input-retract"),
    path("inbox/", inbox.inbox, name="inbox"),
    path("inbox/list", inbox.inbox_list, name="inbox-list"),
    path("inbox/bulk", inbox.bulk_decide, name="inbox-bulk"),
    path("inbox/<uuid:ticket_id>/decide", inbox.row_decide, name="inbox-decide"),
    path("inbox/policy", inbox_policy.policy_decide, name="inbox-policy"),
    path("saved-views/<str:page>/save", saved_view_forms.save_view, name="saved-view-save"),
    path(
        "saved-views/<int:view_id>/delete", saved_view_forms.delete_view, name="saved-view-delete"
    ),
    path("audit/", audit.audit, name="audit"),
    path("audit/export.csv", exports.audit_export, name="audit-export"),
    path("tokens/", tokens.token_list, name="tokens"),
    path("notifications/", notifications.notifications, name="notifications"),
    path(
        "notifications/<int:subscription_id>/delete",
        notifications.subscription_delete_view,
        name="notification-unsubscribe",
    ),
    path("notifications/slack-link/<str:token>", slack_link.slack_link, name="slack-link"),
    path(
        "notifications/slack-links/<int:link_id>/delete",
        slack_link.slack_unlink,
        name="slack-unlink",
    ),
    path("integrations/slack/actions", slack_actions.slack_actions, name="slack-actions"),
    path("approvals/email/<str:token>", email_approvals.email_approval, name="email-approval"),
    path("notifications/routes/", notification_routes.route_list, name="notification-routes"),
    path("notifications/routes/new", notification_routes.route_new, name="notification-route-new"),
    path(
        "notifications/routes/<int:rule_id>/edit",
        notification_routes.route_edit,
        name="notification-route-edit",
    ),
    path(
        "notifications/routes/<int:rule_id>/delete",
        notification_routes.route_delete_view,
        name="notification-route-delete",
    ),
    path(
        "notifications/channels/new",
        notification_channels.channel_new,
        name="notification-channel-new",
    ),
    path(
        "notifications/channels/<int:channel_id>/edit",
        notification_channels.channel_edit,
        name="notification-channel-edit",
    ),
    path(
        "notifications/channels/<int:channel_id>/delete",
        notification_channels.channel_delete_view,
        name="notification-channel-delete",
    ),
    path("schedules/", schedules.schedule_list, name="schedules"),
    path("schedules/new", schedules.schedule_new, name="schedule-new"),
    path("schedules/<uuid:schedule_id>/", schedules.schedule_detail, name="schedule-detail"),
    path("schedules/<uuid:schedule_id>/edit", schedules.schedule_edit, name="schedule-edit"),
    path(
        "schedules/<uuid:schedule_id>/pause", schedules.schedule_pause_view, name="schedule-pause"
    ),
    path(
        "schedules/<uuid:schedule_id>/resume",
        schedules.schedule_resume_view,
        name="schedule-resume",
    ),
    path(
        "schedules/<uuid:schedule_id>/run-now",
        schedules.schedule_run_now_view,
        name="schedule-run-now",
    ),
    path(
        "schedules/<uuid:schedule_id>/delete",
        schedules.schedule_delete_view,
        name="schedule-delete",
    ),
    path("failures/", failures.failure_list, name="failures"),
    path("failures/<uuid:group_id>/state", failures.failure_set_state, name="failure-state"),
    path("replays/", replays.replay_list, name="replays"),
    path("replays/preview", replays.replay_preview, name="replay-preview"),
    path("replays/<uuid:set_id>/", replays.replay_detail, name="replay-detail"),
    path("replays/<uuid:set_id>/table", replays.replay_table, name="replay-table"),
    path("replays/<uuid:set_id>/cancel", replays.replay_cancel_view, name="replay-cancel"),
    path("tokens/<int:token_id>/revoke", tokens.token_revoke_view, name="token-revoke"),
    path("teams/", teams.team_list, name="teams"),
    path("teams/<slug:slug>/", teams.team_detail, name="team-detail"),
    path("teams/<slug:slug>/settings", teams.team_settings, name="team-settings"),
    path("teams/<slug:slug>/freeze", teams.team_freeze_view, name="team-freeze"),
    path("teams/<slug:slug>/unfreeze", teams.team_unfreeze_view, name="team-unfreeze"),
    path("teams/<slug:slug>/members", teams.team_member_set, name="team-member-set"),
    path(
        "teams/<slug:slug>/members/<str:username>/remove",
        teams.team_member_remove,
        name="team-member-remove",
    ),
]
