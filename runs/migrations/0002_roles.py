from django.db import migrations


def create_roles(apps, schema_editor):
    from common.roles import sync_roles

    sync_roles(apps)


def drop_roles(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=["viewer", "operator", "admin"]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0001_initial"),
        ("agents", "0002_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_roles, drop_roles)]
