# The models of the domain apps move to their apps' labels: ReplaySet and ReplayItem to
# `replays`, the notification models and the failure groups to `operations`, SavedView to
# `accounts` (each app's migrations/0001 takes them over, with their content types). Their
# tables stay as they are (runs_<model>): only Django's model state changes here.

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0023_run_created_span"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name="failuregroup",
                    name="state_changed_by",
                ),
                migrations.RemoveField(
                    model_name="failuregroup",
                    name="team",
                ),
                migrations.RemoveField(
                    model_name="failuregrouprun",
                    name="group",
                ),
                migrations.RemoveField(
                    model_name="notificationdelivery",
                    name="channel",
                ),
                migrations.RemoveField(
                    model_name="notificationrule",
                    name="channel",
                ),
                migrations.DeleteModel(
                    name="NotificationCircuit",
                ),
                migrations.RemoveField(
                    model_name="notificationdelivery",
                    name="user",
                ),
                migrations.RemoveField(
                    model_name="notificationrule",
                    name="agent",
                ),
                migrations.RemoveField(
                    model_name="notificationsubscription",
                    name="agent",
                ),
                migrations.RemoveField(
                    model_name="notificationsubscription",
                    name="user",
                ),
                migrations.RemoveField(
                    model_name="replayitem",
                    name="original_run",
                ),
                migrations.RemoveField(
                    model_name="replayitem",
                    name="replay_run",
                ),
                migrations.RemoveField(
                    model_name="replayitem",
                    name="replay_set",
                ),
                migrations.RemoveField(
                    model_name="replayset",
                    name="agent",
                ),
                migrations.RemoveField(
                    model_name="replayset",
                    name="created_by",
                ),
                migrations.RemoveField(
                    model_name="replayset",
                    name="version",
                ),
                migrations.RemoveField(
                    model_name="savedview",
                    name="user",
                ),
                migrations.DeleteModel(
                    name="FailureGroup",
                ),
                migrations.DeleteModel(
                    name="FailureGroupRun",
                ),
                migrations.DeleteModel(
                    name="NotificationChannel",
                ),
                migrations.DeleteModel(
                    name="NotificationDelivery",
                ),
                migrations.DeleteModel(
                    name="NotificationRule",
                ),
                migrations.DeleteModel(
                    name="NotificationSubscription",
                ),
                migrations.DeleteModel(
                    name="ReplayItem",
                ),
                migrations.DeleteModel(
                    name="ReplaySet",
                ),
                migrations.DeleteModel(
                    name="SavedView",
                ),
            ],
            database_operations=[],
        ),
    ]
