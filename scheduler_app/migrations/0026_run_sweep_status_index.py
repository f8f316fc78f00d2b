"""A sweep's runs by status, with updated_at: its counts and the sweep table's fingerprint
read from the index alone. Built without blocking the runs' writes."""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run in a transaction

    dependencies = [("scheduler_app", "0025_queued_ask")]

    operations = [
        AddIndexConcurrently(
            model_name="run",
            index=models.Index(
                fields=["sweep", "status"], include=["updated_at"], name="run_sweep_status_idx"
            ),
        ),
    ]
