"""Operators create, change, pause, resume and run now their teams' schedules
(`runs.add_schedule`, `change_schedule`, `run_schedule` move to OPERATE in
common/roles.py); deleting one stays an admin's. Granting only adds: admins keep all four."""

from django.db import migrations


def grant(apps, schema_editor):
    from common.roles import sync_roles

    sync_roles(apps)


class Migration(migrations.Migration):
    dependencies = [("runs", "0024_domain_models_move")]

    operations = [migrations.RunPython(grant, migrations.RunPython.noop)]
