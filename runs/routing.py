from __future__ import annotations

from django.urls import path

from runs.consumers import DashboardConsumer, RunStreamConsumer

websocket_urlpatterns = [
    path("ws/runs/<str:run_id>/", RunStreamConsumer.as_asgi()),
    path("ws/dashboard/", DashboardConsumer.as_asgi()),
]
