# Takes over ReplaySet and ReplayItem from the `runs` app (runs/migrations/0024): their
# tables (runs_<model>) already exist, so only the model state is created, with the same
# table, index and constraint names; their content types move too, so the permissions
# granted on them (roles, groups), the admin log and generic relations keep pointing at them.

import django.db.models.deletion
import django.utils.timezone
import runs.fields
from django.conf import settings
from django.db import migrations, models

MODELS = (
    "replayset",
    "replayitem",
)


def _move_content_types(from_label, to_label):
    def move(apps, schema_editor):
        content_type = apps.get_model("contenttypes", "ContentType")
        for model in MODELS:
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
        ('agents', '0006_teams'),
        ('runs', '0024_domain_models_move'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='ReplaySet',
                    fields=[
                        ('id', models.UUIDField(default=runs.fields.uuid7_default, editable=False, help_text='Replay set id.', primary_key=True, serialize=False)),
                        ('filters', models.JSONField(blank=True, default=dict, help_text='How the original runs were picked.')),
                        ('ticket_policy', models.CharField(choices=[('approve_all', 'Approve All'), ('reject_all', 'Reject All'), ('as_recorded', 'As Recorded')], default='as_recorded', help_text="How the replays' tickets are decided (never by a person).", max_length=20)),
                        ('http_mode', models.CharField(choices=[('live', 'Live'), ('recorded', 'Recorded')], default='recorded', help_text="http_get: called for real, or answered from the original run's result.", max_length=10)),
                        ('concurrency', models.PositiveSmallIntegerField(default=2, help_text='Replays of this set running at once, at most.')),
                        ('status', models.CharField(choices=[('running', 'Running'), ('done', 'Done'), ('cancelled', 'Cancelled')], default='running', help_text='State.', max_length=10)),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now, help_text='When it started.')),
                        ('finished_at', models.DateTimeField(blank=True, help_text='When its last replay ended.', null=True)),
                        ('agent', models.ForeignKey(help_text='Agent replayed.', on_delete=django.db.models.deletion.PROTECT, related_name='+', to='agents.agent')),
                        ('created_by', models.ForeignKey(blank=True, help_text='Who started it.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('version', models.ForeignKey(help_text='Version the replays run on (a published one or a draft snapshot).', on_delete=django.db.models.deletion.PROTECT, related_name='+', to='agents.agentversion')),
                    ],
                    options={
                        'db_table': 'runs_replayset',
                        'ordering': ['-created_at'],
                        'permissions': [('replay_runs', 'Can replay past runs on an agent version')],
                    },
                ),
                migrations.CreateModel(
                    name='ReplayItem',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('position', models.PositiveIntegerField(help_text='Order in the set (oldest original first).')),
                        ('status', models.CharField(choices=[('pending', 'Pending'), ('running', 'Running'), ('done', 'Done'), ('skipped', 'Skipped')], default='pending', help_text='State.', max_length=10)),
                        ('note', models.CharField(blank=True, help_text='Why it was skipped.', max_length=300)),
                        ('original_run', models.ForeignKey(help_text='Run replayed (empty once retention deleted it).', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='runs.run')),
                        ('replay_run', models.OneToOneField(blank=True, help_text='The replay (empty until started).', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='replay_item', to='runs.run')),
                        ('replay_set', models.ForeignKey(help_text='Its set.', on_delete=django.db.models.deletion.CASCADE, related_name='items', to='replays.replayset')),
                    ],
                    options={
                        'db_table': 'runs_replayitem',
                        'ordering': ['replay_set', 'position'],
                        'indexes': [models.Index(condition=models.Q(('status', 'pending')), fields=['replay_set', 'position'], name='replayitem_pending_idx')],
                        'constraints': [models.UniqueConstraint(fields=('replay_set', 'position'), name='replayitem_unique_position')],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(
            _move_content_types("runs", "replays"), _move_content_types("replays", "runs")
        ),
    ]
