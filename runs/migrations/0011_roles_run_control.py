from django.db import migrations


def grant(apps, schema_editor):
    from common.roles import sync_roles

    sync_roles(apps)  # inputs, background tasks, priorities and schedules


class Migration(migrations.Migration):
    dependencies = [("runs", "0010_run_control")]

    operations = [migrations.RunPython(grant, migrations.RunPython.noop)]
