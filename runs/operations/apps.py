from django.apps import AppConfig


class OperationsConfig(AppConfig):
    name = "runs.operations"
    label = "operations"
    verbose_name = "Operations"
    default_auto_field = "django.db.models.BigAutoField"
