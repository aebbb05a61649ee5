from django.urls import path

from runs.views import actions, audit, control, dashboard, detail, inbox, lists, tokens

app_name = "runs"

urlpatterns = [
    path("", dashboard.dashboard, name="dashboard"),
    path("dashboard/stats", dashboard.dashboard_stats, name="dashboard-stats"),
    path("runs/", lists.run_list, name="run-list"),
    path("runs/<uuid:run_id>/", detail.run_page, name="run-detail"),
    path("runs/<uuid:run_id>/row", lists.run_row, name="run-row"),
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
    path("runs/<uuid:run_id>/cancel", actions.cancel, name="run-cancel"),
    path("runs/<uuid:run_id>/retry", actions.retry, name="run-retry"),
    path("runs/<uuid:run_id>/priority", control.set_priority, name="run-priority"),
    path("tickets/<uuid:ticket_id>/decide", actions.decide, name="ticket-decide"),
    path("tickets/<uuid:ticket_id>/edit-preview", actions.edit_preview, name="ticket-edit-preview"),
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
    path("audit/", audit.audit, name="audit"),
    path("tokens/", tokens.token_list, name="tokens"),
    path("tokens/<int:token_id>/revoke", tokens.token_revoke_view, name="token-revoke"),
]
