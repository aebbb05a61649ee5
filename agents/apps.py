from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"
    verbose_name = "Agents and models"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from agents import checks  # noqa: F401  (registers the system checks)
