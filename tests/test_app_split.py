"""The apps inside runs (docs/architecture.md): their code moved, and the models that
belong to an app carry its label (replays, operations, accounts) while keeping their
tables (runs_<model>); their content types moved with them, so permissions and the admin
log still point at them, and old admin URLs under /admin/runs/ redirect. The pages keep
their paths and names in the one `runs` namespace."""

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


OWNERS = {
    "ReplaySet": "replays",
    "ReplayItem": "replays",
    "FailureGroup": "operations",
    "FailureGroupRun": "operations",
    "NotificationChannel": "operations",
    "NotificationCircuit": "operations",
    "NotificationDelivery": "operations",
    "NotificationRule": "operations",
    "NotificationSubscription": "operations",
    "SavedView": "accounts",
    "Budget": "operations",
    "SlackMessage": "operations",
    "SlackUserLink": "operations",
}
# Models an app was born with (never the core's): their own table, no old admin URL.
BORN_IN_THEIR_APP = {"Budget", "SlackMessage", "SlackUserLink"}


def test_the_models_of_an_app_carry_its_label_and_keep_their_tables():
    moved = domain_models()
    assert {m.__name__: m._meta.app_label for m in moved} == OWNERS
    for model in moved:
        if model.__name__ in BORN_IN_THEIR_APP:
            assert model._meta.db_table == f"{model._meta.app_label}_{model._meta.model_name}"
            continue
        assert model._meta.db_table == f"runs_{model._meta.model_name}", model
        assert model.__module__.startswith(f"runs.{model._meta.app_label}.models."), model


def test_the_core_keeps_what_its_own_code_holds():
    for name in ("Schedule", "OperatorPreference", "Run", "Ticket"):
        model = apps.get_model("runs", name)
        assert model.__module__.startswith("runs.models."), model


@pytest.mark.django_db
def test_their_content_types_and_admin_urls_are_their_apps(admin_client):
    for model in domain_models():
        name, label = model._meta.model_name, model._meta.app_label
        assert ContentType.objects.get_for_model(model).app_label == label
        assert not ContentType.objects.filter(app_label="runs", model=name).exists()
        if not admin.site.is_registered(model) or model.__name__ in BORN_IN_THEIR_APP:
            continue
        url = reverse(f"admin:{label}_{name}_changelist")
        assert url == f"/admin/{label}/{name}/"
        assert admin_client.get(url).status_code == 200, url
        old = admin_client.get(f"/admin/runs/{name}/1/change/?page=2")
        assert old.status_code == 301, name
        assert old["Location"] == f"/admin/{label}/{name}/1/change/?page=2"


@pytest.mark.django_db
def test_old_admin_urls_of_models_the_core_keeps_do_not_redirect(admin_client):
    assert admin_client.get("/admin/runs/schedule/").status_code == 200


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
