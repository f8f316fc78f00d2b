"""ChatTurn.host points at hosts_app.Host, the same table (state only)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("hosts_app", "0001_initial"),
        ("sessions_app", "0003_turns_stream_in_runagentd"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="chatturn",
                    name="host",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="hosts_app.host",
                    ),
                ),
            ],
            database_operations=[],
        ),
    ]
