from django.db import migrations


def grant(apps, schema_editor):
    from common.roles import sync_roles

    sync_roles(apps)  # adds the remote endpoint permissions to viewer and admin


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0002_roles"),
        ("agents", "0003_config_v2"),
    ]

    operations = [migrations.RunPython(grant, migrations.RunPython.noop)]
