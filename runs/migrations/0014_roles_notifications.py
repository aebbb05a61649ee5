from django.db import migrations


def grant(apps, schema_editor):
    from common.roles import sync_roles

    sync_roles(apps)  # notification channels, rules and the delivery log


class Migration(migrations.Migration):
    dependencies = [("runs", "0013_notifications_escalation")]

    operations = [migrations.RunPython(grant, migrations.RunPython.noop)]
