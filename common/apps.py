from django.apps import AppConfig

from common.writes import cache_batch_statements


class CommonConfig(AppConfig):
    """The lowest app: the audit trail, service errors, JSON safety, the REST API's base
    (authentication, throttling, parsing, error bodies) and personal API tokens. It
    imports neither `agents` nor `runs`; both build on it."""

    name = "common"
    verbose_name = "Audit and access"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        cache_batch_statements()
