# Takes over SavedView from the `runs` app (runs/migrations/0024): their
# tables (runs_<model>) already exist, so only the model state is created, with the same
# table, index and constraint names; their content types move too, so the permissions
# granted on them (roles, groups), the admin log and generic relations keep pointing at them.

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

MODELS = (
    "savedview",
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
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='SavedView',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('page', models.CharField(choices=[('runs', 'Runs'), ('inbox', 'Inbox')], help_text='runs or inbox.', max_length=10)),
                        ('name', models.CharField(help_text="Shown in the page's list of views.", max_length=100)),
                        ('query', models.CharField(blank=True, help_text="The page's query string (its filters).", max_length=2000)),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now, help_text='Saved at.')),
                        ('user', models.ForeignKey(help_text='Whose view it is.', on_delete=django.db.models.deletion.CASCADE, related_name='saved_views', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'db_table': 'runs_savedview',
                        'ordering': ['page', 'name'],
                        'constraints': [models.UniqueConstraint(fields=('user', 'page', 'name'), name='savedview_unique_user_page_name')],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(
            _move_content_types("runs", "accounts"), _move_content_types("accounts", "runs")
        ),
    ]
