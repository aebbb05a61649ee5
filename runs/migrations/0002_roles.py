from django.contrib.auth.management import create_permissions
from django.db import migrations


def create_roles(apps, schema_editor):
    from runs.roles import ROLES

    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for name, perms in ROLES.items():
        group, _ = Group.objects.get_or_create(name=name)
        for app_label, codename in perms:
            group.permissions.add(
                Permission.objects.get(content_type__app_label=app_label, codename=codename)
            )


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
