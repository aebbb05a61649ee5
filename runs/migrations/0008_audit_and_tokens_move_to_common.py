# AuditEntry and ApiToken move to the `common` app (common/migrations/0001 takes them
# over). Their tables stay as they are: only Django's model state changes here.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0007_auditentry_verbose_name_plural'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name='auditentry',
                    name='actor',
                ),
                migrations.RemoveField(
                    model_name='auditentry',
                    name='run',
                ),
                migrations.DeleteModel(
                    name='ApiToken',
                ),
                migrations.DeleteModel(
                    name='AuditEntry',
                ),
            ],
            database_operations=[],
        ),
    ]
