"""Operations' database gauges, served with the core's by /metrics (runs.metrics,
setting AWAKEN_METRICS_DATABASE_GAUGES): notifications being retried, destinations
paused by their circuit breaker. Computed when scraped (and cached by the collector)."""

from __future__ import annotations

from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric

from runs.operations.models.notifications import NotificationCircuit, NotificationDelivery


def notification_gauges() -> list[Metric]:
    """Deliveries whose last attempt failed and that will be retried; open circuits."""
    retrying = NotificationDelivery.objects.filter(
        status__in=[NotificationDelivery.Status.PENDING, NotificationDelivery.Status.SENDING],
        attempts__gt=0,
    )
    return [
        GaugeMetricFamily(
            "awaken_notifications_retrying",
            "Notification deliveries whose last attempt failed and that will be retried.",
            value=retrying.count(),
        ),
        GaugeMetricFamily(
            "awaken_notification_circuits_open",
            "Notification destinations paused by their circuit breaker.",
            value=NotificationCircuit.objects.filter(open_until__gt=timezone.now()).count(),
        ),
    ]
