from django.apps import AppConfig


class OperationsConfig(AppConfig):
    name = "runs.operations"
    label = "operations"
    verbose_name = "Operations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Its Celery tasks, in every process (as RunsConfig.ready does for the core's):
        # the core and beat reach them by name (runs.deliver_notifications, …).
        from runs.operations import tasks  # noqa: F401, PLC0415
