from django.db import migrations


def grant(apps, schema_editor):
    from common.roles import sync_roles

    sync_roles(apps)  # budgets: viewers see them, admins change them


class Migration(migrations.Migration):
    dependencies = [("operations", "0003_budgets")]

    operations = [migrations.RunPython(grant, migrations.RunPython.noop)]
