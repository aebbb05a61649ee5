"""The audit trail and API tokens moved from `runs` to `common`: what was granted stays
granted, and old admin links still lead to the pages."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.contrib.contenttypes.models import ContentType

from common.models import ApiToken, AuditEntry

pytestmark = pytest.mark.django_db


def test_the_moved_models_keep_their_tables_and_belong_to_common():
    assert AuditEntry._meta.db_table == "runs_auditentry"
    assert ApiToken._meta.db_table == "runs_apitoken"
    labels = set(
        ContentType.objects.filter(model__in=["auditentry", "apitoken"]).values_list(
            "app_label", "model"
        )
    )
    assert labels == {("common", "auditentry"), ("common", "apitoken")}


@pytest.mark.parametrize("role", ["viewer", "operator", "admin"])
def test_every_role_may_read_the_audit_trail(role, django_user_model):
    user = django_user_model.objects.create_user(f"someone-{role}")
    user.groups.add(Group.objects.get(name=role))
    assert user.has_perm("common.view_auditentry")


def test_old_admin_links_to_the_audit_trail_lead_to_its_new_place(root_client):
    response = root_client.get("/admin/runs/auditentry/?action__exact=run.start")
    assert response.status_code == 301
    assert response["Location"] == "/admin/common/auditentry/?action__exact=run.start"
    assert root_client.get(response["Location"]).status_code == 200
