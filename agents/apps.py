from importlib import import_module

from django.apps import AppConfig
from django.core.checks import Tags, register

from agents.checks import encryption_keys_check


class AgentsConfig(AppConfig):
    name = "agents"
    verbose_name = "Agents and models"
    default_auto_field = "django.db.models.BigAutoField"

    def import_models(self) -> None:
        super().import_models()
        # models kept in modules of their own (agents.models is near the size cap)
        import_module("agents.models_mcp")

    def ready(self) -> None:
        register(encryption_keys_check, Tags.security, deploy=True)
