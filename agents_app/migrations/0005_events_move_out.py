"""Event and EventStream now belong to events_app (its 0001 takes them over, tables and all):
only Django's state forgets them here; the tables stay."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("agents_app", "0004_research_role"),
        ("events_app", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="Event"),
                migrations.DeleteModel(name="EventStream"),
            ],
            database_operations=[],
        ),
    ]
