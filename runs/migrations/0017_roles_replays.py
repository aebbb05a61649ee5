from django.db import migrations


def grant(apps, schema_editor):
    from common.roles import sync_roles

    sync_roles(apps)  # admins replay past runs on a version (a draft included)


class Migration(migrations.Migration):
    dependencies = [("runs", "0016_forks_replays"), ("agents", "0005_draft_snapshots")]

    operations = [migrations.RunPython(grant, migrations.RunPython.noop)]
