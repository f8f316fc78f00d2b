"""Sweeps made for research loops before sweeps had a kind are the loops' ("research")."""

from django.db import migrations


def mark_loop_sweeps(apps, schema_editor):
    ResearchLoop = apps.get_model("research_app", "ResearchLoop")
    Sweep = apps.get_model("scheduler_app", "Sweep")
    loop_sweeps = ResearchLoop.objects.exclude(sweep=None).values("sweep_id")
    Sweep.objects.filter(pk__in=loop_sweeps).update(kind="research")


class Migration(migrations.Migration):
    dependencies = [
        ("research_app", "0001_initial"),
        ("scheduler_app", "0011_sweep_kind_and_owner"),
    ]

    operations = [migrations.RunPython(mark_loop_sweeps, migrations.RunPython.noop)]
