"""The event log moves here from agents_app. Its tables keep their names (db_table), so this
migration changes only Django's state, plus the content types, so that permissions and admin
log entries follow the models."""

from django.db import migrations, models

MODELS = ("event", "eventstream")


def _relabel(apps, old: str, new: str) -> None:
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model in MODELS:
        if ContentType.objects.filter(app_label=new, model=model).exists():
            continue  # already created under the new label: the old one is merely stale
        ContentType.objects.filter(app_label=old, model=model).update(app_label=new)


def forwards(apps, schema_editor):
    _relabel(apps, "agents_app", "events_app")


def backwards(apps, schema_editor):
    _relabel(apps, "events_app", "agents_app")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("agents_app", "0004_research_role"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="EventStream",
                    fields=[
                        (
                            "name",
                            models.CharField(max_length=100, primary_key=True, serialize=False),
                        ),
                        ("last_seq", models.BigIntegerField(default=0)),
                    ],
                    options={
                        "db_table": "agents_app_eventstream",
                    },
                ),
                migrations.CreateModel(
                    name="Event",
                    fields=[
                        ("id", models.BigAutoField(primary_key=True, serialize=False)),
                        ("stream", models.CharField(max_length=100)),
                        (
                            "seq",
                            models.BigIntegerField(
                                help_text="Position in its stream, from 1, without holes"
                            ),
                        ),
                        ("kind", models.CharField(max_length=64)),
                        ("agent_id", models.CharField(blank=True, max_length=64)),
                        ("payload", models.JSONField(blank=True, default=dict)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                    ],
                    options={
                        "db_table": "agents_app_event",
                        "ordering": ["id"],
                        "indexes": [
                            models.Index(
                                condition=models.Q(("agent_id", ""), _negated=True),
                                fields=["agent_id", "id"],
                                name="event_agent_timeline_idx",
                            )
                        ],
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("stream", "seq"), name="event_stream_seq_unique"
                            )
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(forwards, backwards),
    ]
