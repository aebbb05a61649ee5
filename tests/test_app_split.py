"""The apps inside runs (docs/architecture.md): their code moved, their tables did not.
Every model they hold keeps the `runs` app label and its table, so no migration,
permission, content type or admin URL changed when the code moved; the pages keep their
paths and names in the one `runs` namespace."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.contenttypes.models import ContentType
from django.urls import reverse

DOMAIN_APPS = ("replays", "decisions", "operations", "accounts")
ROOT = Path(__file__).resolve().parent.parent


def domain_models():
    prefixes = tuple(f"runs.{app}." for app in DOMAIN_APPS)
    return sorted(
        (m for m in apps.get_models() if m.__module__.startswith(prefixes)),
        key=lambda m: m._meta.model_name,
    )


def test_each_domain_app_is_installed_under_runs():
    for app in DOMAIN_APPS:
        assert apps.get_app_config(app).name == f"runs.{app}"


def test_the_models_that_moved_keep_the_runs_label_and_their_tables():
    moved = domain_models()
    assert {m.__name__ for m in moved} >= {"ReplaySet", "NotificationChannel", "SavedView"}
    for model in moved:
        assert model._meta.app_label == "runs", model
        assert model._meta.db_table == f"runs_{model._meta.model_name}", model


@pytest.mark.django_db
def test_their_content_types_and_admin_urls_are_the_runs_ones(admin_client):
    for model in domain_models():
        name = model._meta.model_name
        assert ContentType.objects.get_for_model(model).app_label == "runs"
        if not admin.site.is_registered(model):
            continue
        url = reverse(f"admin:runs_{name}_changelist")
        assert url == f"/admin/runs/{name}/"
        assert admin_client.get(url).status_code == 200, url


def test_page_names_of_every_app_resolve_in_the_runs_namespace():
    assert reverse("runs:inbox") == "/inbox/"  # decisions
    assert reverse("runs:notifications") == "/notifications/"  # operations
    assert reverse("runs:tokens") == "/tokens/"  # accounts
    assert reverse("runs:replays") == "/replays/"  # replays
    assert reverse("runs:run-list") == "/runs/"  # the core


def test_the_layers_inside_runs_name_every_part_of_runs():
    """import-linter checks only the modules a layer names: a module added to runs must be
    placed in a layer (an app, the core or the runtime), or it could import anything."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c.get("containers") == ["runs"]]
    named = {part.strip() for layer in contract["layers"] for part in layer.split(":")}
    parts = {
        path.stem if path.is_file() else path.name
        for path in (ROOT / "runs").iterdir()
        if (path.suffix == ".py" and path.name != "__init__.py")
        or (path.is_dir() and (path / "__init__.py").exists())
    }
    assert parts - named == set()
