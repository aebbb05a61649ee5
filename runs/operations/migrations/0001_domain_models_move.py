# Takes over the notification models and the failure groups from the `runs` app
# (runs/migrations/0024): their tables (runs_<model>) already exist, so only the model
# state is created, with the same table, index and constraint names; their content types
# move too, so the permissions granted on them (roles, groups), the admin log and generic
# relations keep pointing at them.

import django.db.models.deletion
import django.utils.timezone
import runs.fields
from django.conf import settings
from django.db import migrations, models

MODELS = (
    "notificationchannel",
    "notificationrule",
    "notificationsubscription",
    "notificationdelivery",
    "notificationcircuit",
    "failuregroup",
    "failuregrouprun",
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
        ('runs', '0024_domain_models_move'),
        ('agents', '0006_teams'),
        ('common', '0003_scale_pages'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='NotificationChannel',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(help_text='Shown in rules and logs.', max_length=100, unique=True)),
                        ('kind', models.CharField(choices=[('webhook', 'Webhook (signed JSON)'), ('slack', 'Slack incoming webhook'), ('email', 'Email')], help_text='How it delivers.', max_length=10)),
                        ('url_encrypted', models.TextField(blank=True, editable=False, help_text='Webhook URL, encrypted at rest (it may carry a token).')),
                        ('url_display', models.CharField(blank=True, help_text="The URL's scheme and host, for lists and logs (no path, no token).", max_length=300)),
                        ('signing_secret_encrypted', models.TextField(blank=True, editable=False, help_text='HMAC-SHA256 signing secret for webhooks, encrypted at rest.')),
                        ('email_to', models.TextField(blank=True, help_text='Email channel: recipients, comma-separated.')),
                        ('enabled', models.BooleanField(default=True, help_text='Disabled channels get nothing.')),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now, help_text='Created at.')),
                        ('updated_at', models.DateTimeField(default=django.utils.timezone.now, help_text='Last changed at.')),
                    ],
                    options={
                        'db_table': 'runs_notificationchannel',
                        'ordering': ['name'],
                    },
                ),
                migrations.CreateModel(
                    name='NotificationCircuit',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('destination', models.CharField(help_text='channel:<id> or user:<id>.', max_length=40, unique=True)),
                        ('failures', models.PositiveIntegerField(default=0, help_text='Failed attempts in a row.')),
                        ('open_until', models.DateTimeField(blank=True, help_text='Open: nothing is sent to it before this time.', null=True)),
                        ('busy_until', models.DateTimeField(blank=True, help_text='A drainer sends to it until this time (its lease).', null=True)),
                        ('last_error', models.TextField(blank=True, help_text='Why the last failed attempt failed.')),
                        ('last_failure_at', models.DateTimeField(blank=True, help_text='Last failure.', null=True)),
                        ('last_success_at', models.DateTimeField(blank=True, help_text='Last delivery.', null=True)),
                    ],
                    options={
                        'db_table': 'runs_notificationcircuit',
                        'ordering': ['destination'],
                    },
                ),
                migrations.CreateModel(
                    name='FailureGroup',
                    fields=[
                        ('id', models.UUIDField(default=runs.fields.uuid7_default, editable=False, help_text='Group id (UUID v7).', primary_key=True, serialize=False)),
                        ('fingerprint', models.CharField(help_text='SHA-256 of the error type, where it failed and the message.', max_length=64)),
                        ('error_type', models.CharField(help_text="The runs' reason: error, timeout or stopped:<condition>.", max_length=100)),
                        ('source', models.CharField(blank=True, help_text='Where it failed: provider:<slug>, endpoint:<slug> or tool:<name>.', max_length=220)),
                        ('title', models.CharField(help_text='The message with ids, numbers and quoted values masked.', max_length=300)),
                        ('sample_message', models.TextField(blank=True, help_text="The first occurrence's message.")),
                        ('count', models.PositiveBigIntegerField(default=0, help_text='Failed runs so far.')),
                        ('first_seen', models.DateTimeField(default=django.utils.timezone.now, help_text='First failure.')),
                        ('last_seen', models.DateTimeField(default=django.utils.timezone.now, help_text='Latest failure.')),
                        ('last_run_id', models.UUIDField(blank=True, help_text='The latest failed run.', null=True)),
                        ('agent_ids', models.JSONField(blank=True, default=list, help_text='Ids of the agents affected (the first 50).')),
                        ('state', models.CharField(choices=[('open', 'open'), ('resolved', 'resolved'), ('ignored', 'ignored')], default='open', help_text='Triage state.', max_length=10)),
                        ('state_changed_at', models.DateTimeField(blank=True, help_text='When it was last resolved, ignored or reopened.', null=True)),
                        ('state_changed_by_label', models.CharField(blank=True, help_text='Who did, as the audit log names them.', max_length=200)),
                        ('regressed_at', models.DateTimeField(blank=True, help_text='When it last failed again after being resolved.', null=True)),
                        ('state_changed_by', models.ForeignKey(blank=True, help_text='Who did (none: reopened by a new failure).', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('team', models.ForeignKey(db_index=False, help_text="Team of the failed runs' agents: its members see the group.", on_delete=django.db.models.deletion.CASCADE, related_name='+', to='common.team')),
                    ],
                    options={
                        'db_table': 'runs_failuregroup',
                        'ordering': ['-last_seen'],
                    },
                ),
                migrations.CreateModel(
                    name='FailureGroupRun',
                    fields=[
                        ('run_id', models.UUIDField(help_text='The failed run.', primary_key=True, serialize=False)),
                        ('created_at', models.DateTimeField(help_text="When the run was created (the list's order).")),
                        ('group', models.ForeignKey(db_index=False, help_text='Its group.', on_delete=django.db.models.deletion.CASCADE, related_name='runs', to='operations.failuregroup')),
                    ],
                    options={
                        'db_table': 'runs_failuregrouprun',
                    },
                ),
                migrations.CreateModel(
                    name='NotificationDelivery',
                    fields=[
                        ('id', models.UUIDField(default=runs.fields.uuid7_default, editable=False, help_text='Delivery id.', primary_key=True, serialize=False)),
                        ('event', models.CharField(choices=[('ticket.opened', 'a ticket opens'), ('ticket.deadline_near', "a ticket's deadline nears"), ('run.failed', 'a run fails'), ('run.given_up', 'a run is given up after repeated crashes'), ('failure_group.new', 'a new kind of failure appears (or a resolved one again)')], help_text='What happened.', max_length=40)),
                        ('subject', models.CharField(help_text='What it is about: ticket:<id> or run:<id>.', max_length=100)),
                        ('payload', models.JSONField(help_text="The event's body as sent (without secrets).")),
                        ('status', models.CharField(choices=[('pending', 'Pending'), ('sending', 'Sending'), ('delivered', 'Delivered'), ('failed', 'Failed')], default='pending', help_text='Where it is.', max_length=10)),
                        ('attempts', models.PositiveIntegerField(default=0, help_text='Attempts made so far.')),
                        ('next_attempt_at', models.DateTimeField(default=django.utils.timezone.now, help_text="Pending: when to try next. Sending: when the drainer's lease lapses.")),
                        ('last_attempt_at', models.DateTimeField(blank=True, help_text='Last try at.', null=True)),
                        ('response_code', models.PositiveIntegerField(blank=True, help_text='HTTP status of the last attempt.', null=True)),
                        ('last_error', models.TextField(blank=True, help_text='Why the last attempt failed.')),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now, help_text='Queued at.')),
                        ('delivered_at', models.DateTimeField(blank=True, help_text='Delivered at.', null=True)),
                        ('channel', models.ForeignKey(blank=True, db_constraint=False, help_text='Channel it goes to (or a subscriber).', null=True, on_delete=django.db.models.deletion.CASCADE, related_name='deliveries', to='operations.notificationchannel')),
                        ('user', models.ForeignKey(blank=True, db_constraint=False, help_text='Subscriber it goes to by email (or a channel).', null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'verbose_name_plural': 'notification deliveries',
                        'db_table': 'runs_notificationdelivery',
                        'ordering': ['-created_at'],
                    },
                ),
                migrations.CreateModel(
                    name='NotificationRule',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('events', models.JSONField(blank=True, default=list, help_text='Event names it routes; empty: every event.')),
                        ('tool', models.CharField(blank=True, help_text='Only tickets for tools matching this glob (send_*); empty: any.', max_length=200)),
                        ('enabled', models.BooleanField(default=True, help_text='Disabled rules route nothing.')),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now, help_text='Created at.')),
                        ('agent', models.ForeignKey(blank=True, help_text="Only this agent's runs; empty: every agent.", null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='agents.agent')),
                        ('channel', models.ForeignKey(help_text='Where matching events go.', on_delete=django.db.models.deletion.CASCADE, related_name='rules', to='operations.notificationchannel')),
                    ],
                    options={
                        'db_table': 'runs_notificationrule',
                        'ordering': ['channel__name', 'id'],
                    },
                ),
                migrations.CreateModel(
                    name='NotificationSubscription',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('events', models.JSONField(blank=True, default=list, help_text='Event names; empty: every event.')),
                        ('tool', models.CharField(blank=True, help_text='Only tools matching this glob; empty: any.', max_length=200)),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now, help_text='Subscribed at.')),
                        ('agent', models.ForeignKey(blank=True, help_text="Only this agent's runs; empty: every agent.", null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='agents.agent')),
                        ('user', models.ForeignKey(help_text="Subscriber (gets email at their account's address).", on_delete=django.db.models.deletion.CASCADE, related_name='notification_subscriptions', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'db_table': 'runs_notificationsubscription',
                        'ordering': ['user_id', 'id'],
                    },
                ),
                migrations.AddIndex(
                    model_name='failuregroup',
                    index=models.Index(fields=['state', '-last_seen'], name='failuregroup_state_idx'),
                ),
                migrations.AddIndex(
                    model_name='failuregroup',
                    index=models.Index(fields=['team', 'state', '-last_seen'], name='failuregroup_team_state_idx'),
                ),
                migrations.AddConstraint(
                    model_name='failuregroup',
                    constraint=models.UniqueConstraint(fields=('team', 'fingerprint'), name='failuregroup_unique_team_fingerprint'),
                ),
                migrations.AddIndex(
                    model_name='failuregrouprun',
                    index=models.Index(fields=['group', '-created_at', '-run_id'], name='failuregrouprun_idx'),
                ),
                migrations.AddIndex(
                    model_name='notificationdelivery',
                    index=models.Index(condition=models.Q(('status__in', ['pending', 'sending'])), fields=['next_attempt_at'], name='notification_due_idx'),
                ),
                migrations.AddConstraint(
                    model_name='notificationdelivery',
                    constraint=models.UniqueConstraint(condition=models.Q(('channel__isnull', False)), fields=('channel', 'event', 'subject'), name='notification_once_per_channel'),
                ),
                migrations.AddConstraint(
                    model_name='notificationdelivery',
                    constraint=models.UniqueConstraint(condition=models.Q(('user__isnull', False)), fields=('user', 'event', 'subject'), name='notification_once_per_user'),
                ),
                migrations.AddConstraint(
                    model_name='notificationdelivery',
                    constraint=models.CheckConstraint(condition=models.Q(('channel__isnull', False), ('user__isnull', False), _connector='XOR'), name='notification_one_destination'),
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(
            _move_content_types("runs", "operations"), _move_content_types("operations", "runs")
        ),
    ]
