from django.apps import AppConfig


class ReplaysConfig(AppConfig):
    name = "runs.replays"
    label = "replays"
    verbose_name = "Replays and forks"
    default_auto_field = "django.db.models.BigAutoField"
