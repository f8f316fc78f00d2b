"""Host now belongs to hosts_app (its 0001 takes it over, table and all): the foreign keys
to it are re-pointed and only Django's state forgets it here; the table stays."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agents_app", "0006_host_from_hosts_app"),
        ("hosts_app", "0001_initial"),
        ("scheduler_app", "0008_metric_series_source"),
        ("sessions_app", "0004_host_from_hosts_app"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="schedulerequest",
                    name="host",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="requests",
                        to="hosts_app.host",
                    ),
                ),
                migrations.AlterField(
                    model_name="gpu",
                    name="host",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="gpus",
                        to="hosts_app.host",
                    ),
                ),
                migrations.DeleteModel(name="Host"),
            ],
            database_operations=[],
        ),
    ]
