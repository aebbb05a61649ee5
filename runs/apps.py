from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Runs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registers the Celery tasks in every process, not only in workers (which
        # autodiscover them): services enqueue by task name (runs.services.dispatch), so
        # the tasks module imports the services and not the other way round. Imported
        # here because it loads the models, which only exist once the apps are ready.
        from runs import tasks  # noqa: F401, PLC0415
