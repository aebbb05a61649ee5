# Takes over AuditEntry and ApiToken from the `runs` app (runs/migrations/0008): the
# tables (runs_auditentry, runs_apitoken) already exist, so only the model state is
# created; their content types move too, so the permissions granted on them (roles,
# groups) stay granted.

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


def _move_content_types(from_label, to_label):
    def move(apps, schema_editor):
        content_type = apps.get_model("contenttypes", "ContentType")
        for model in ("auditentry", "apitoken"):
            if content_type.objects.filter(app_label=to_label, model=model).exists():
                continue
            content_type.objects.filter(app_label=from_label, model=model).update(
                app_label=to_label
            )

    return move


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('contenttypes', '0002_remove_content_type_name'),
        ('runs', '0008_audit_and_tokens_move_to_common'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='ApiToken',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(help_text="What it is for, e.g. 'ci' or 'laptop'.", max_length=100)),
                        ('prefix', models.CharField(help_text='Non-secret lookup part, e.g. awk_1a2b3c4d5e6f.', max_length=32, unique=True)),
                        ('token_hash', models.CharField(help_text='sha256 hex digest of the token.', max_length=64)),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now, help_text='When it was created.')),
                        ('expires_at', models.DateTimeField(blank=True, help_text='Rejected after this time (never if empty).', null=True)),
                        ('last_used_at', models.DateTimeField(blank=True, help_text='Last authenticated request (minute precision).', null=True)),
                        ('revoked_at', models.DateTimeField(blank=True, help_text='Revoked at; then rejected.', null=True)),
                        ('user', models.ForeignKey(help_text="Owner: the token acts with this user's permissions.", on_delete=django.db.models.deletion.CASCADE, related_name='api_tokens', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'db_table': 'runs_apitoken',
                        'ordering': ['-created_at', '-id'],
                    },
                ),
                migrations.CreateModel(
                    name='AuditEntry',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('actor_label', models.CharField(help_text="Who, as shown: username, 'system', 'cli'.", max_length=200)),
                        ('action', models.CharField(help_text='e.g. run.start, ticket.approve, run.cancel.', max_length=40)),
                        ('target_type', models.CharField(help_text='run, ticket, thread, agent …', max_length=40)),
                        ('target_id', models.CharField(help_text='Id of the target.', max_length=100)),
                        ('before', models.JSONField(blank=True, help_text="State before (e.g. the model's arguments).", null=True)),
                        ('after', models.JSONField(blank=True, help_text='State after (e.g. the edited arguments).', null=True)),
                        ('comment', models.TextField(blank=True, help_text='Reason given.')),
                        ('source', models.CharField(default='ui', help_text='ui, api, cli, admin or system.', max_length=20)),
                        ('request_id', models.CharField(blank=True, help_text='Request that caused it.', max_length=64)),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now, help_text='When.')),
                        ('actor', models.ForeignKey(blank=True, help_text='User who acted (null for the system or the CLI).', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='audit_entries', to=settings.AUTH_USER_MODEL)),
                        ('run', models.ForeignKey(blank=True, help_text='Run concerned, for filtering.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='audit_entries', to='runs.run')),
                    ],
                    options={
                        'verbose_name_plural': 'audit entries',
                        'db_table': 'runs_auditentry',
                        'ordering': ['-created_at', '-id'],
                        'indexes': [models.Index(fields=['-created_at', '-id'], name='audit_recent_idx'), models.Index(fields=['action', '-created_at', '-id'], name='audit_action_recent_idx'), models.Index(fields=['actor_label', '-created_at', '-id'], name='audit_actor_recent_idx')],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(
            _move_content_types("runs", "common"), _move_content_types("common", "runs")
        ),
    ]
