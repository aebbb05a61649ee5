from django.db import migrations


def grant(apps, schema_editor):
    from common.roles import sync_roles

    sync_roles(apps)  # view_auditentry, now the `common` app's, for every role


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0008_audit_and_tokens_move_to_common"),
        ("common", "0001_initial"),
    ]

    operations = [migrations.RunPython(grant, migrations.RunPython.noop)]
