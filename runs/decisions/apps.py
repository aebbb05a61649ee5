from django.apps import AppConfig


class DecisionsConfig(AppConfig):
    name = "runs.decisions"
    label = "decisions"
    verbose_name = "Decisions"
    default_auto_field = "django.db.models.BigAutoField"
