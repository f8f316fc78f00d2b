"""The metric points' (series, step) index also holds the value, so a chart's downsampling
reads the index alone. Built beside the old one without blocking writes (a table of 10^8
points takes minutes), then the old one goes."""

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run in a transaction

    dependencies = [("scheduler_app", "0023_run_created_by_request_account")]

    operations = [
        AddIndexConcurrently(
            model_name="metricpoint",
            index=models.Index(
                fields=["series", "step"], include=["value"], name="metric_point_step_value_idx"
            ),
        ),
        RemoveIndexConcurrently(model_name="metricpoint", name="metric_point_step_idx"),
    ]
