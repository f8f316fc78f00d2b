"""Host moves here from scheduler_app, below the agents that run on it. Its table keeps its
name (db_table), so this migration changes only Django's state, plus the content type, so
that permissions and admin log entries follow the model."""

from django.db import migrations, models


def _relabel(apps, old: str, new: str) -> None:
    ContentType = apps.get_model("contenttypes", "ContentType")
    if ContentType.objects.filter(app_label=new, model="host").exists():
        return  # already created under the new label: the old one is merely stale
    ContentType.objects.filter(app_label=old, model="host").update(app_label=new)


def forwards(apps, schema_editor):
    _relabel(apps, "scheduler_app", "hosts_app")


def backwards(apps, schema_editor):
    _relabel(apps, "hosts_app", "scheduler_app")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("scheduler_app", "0008_metric_series_source"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Host",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("name", models.CharField(max_length=63, unique=True)),
                        ("hostname", models.CharField(blank=True, max_length=255)),
                        (
                            "status",
                            models.CharField(
                                choices=[
                                    ("online", "Online"),
                                    ("offline", "Offline (stopped cleanly)"),
                                    ("dead", "Dead (stopped heart-beating)"),
                                ],
                                default="online",
                                max_length=16,
                            ),
                        ),
                        ("daemon_pid", models.IntegerField(blank=True, null=True)),
                        ("daemon_started_at", models.DateTimeField(blank=True, null=True)),
                        ("last_heartbeat", models.DateTimeField(blank=True, null=True)),
                        ("version", models.CharField(blank=True, max_length=40)),
                        (
                            "info",
                            models.JSONField(
                                blank=True, default=dict, help_text="Python, CPU count, platform"
                            ),
                        ),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                    ],
                    options={
                        "db_table": "scheduler_app_host",
                        "ordering": ["name"],
                        "indexes": [
                            models.Index(
                                fields=["status", "last_heartbeat"], name="host_liveness_idx"
                            )
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(forwards, backwards),
    ]
