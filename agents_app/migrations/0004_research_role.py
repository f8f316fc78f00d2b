"""Research loops (L2) get the role `research` instead of `orchestrator`, which stays the chat
session agent's (L1). Loops already stored keep their `orchestrator-…` ids, so every link and
API call naming them still works; only their role (and their memory entries' role) says
research from now on, as new loops do."""

from django.db import migrations, models

RESEARCH_AGENT = "agentsys.agents.research.ResearchAgent"


def _relabel(apps, old: str, new: str) -> None:
    Agent = apps.get_model("agents_app", "Agent")
    MemoryEntry = apps.get_model("memory_app", "MemoryEntry")
    loops = Agent.objects.filter(cls_path=RESEARCH_AGENT)
    MemoryEntry.objects.filter(role=old, agent_id__in=loops.values("id")).update(role=new)
    loops.filter(role=old).update(role=new)


def forwards(apps, schema_editor):
    _relabel(apps, "orchestrator", "research")


def backwards(apps, schema_editor):
    _relabel(apps, "research", "orchestrator")


class Migration(migrations.Migration):
    dependencies = [
        ("agents_app", "0003_one_word_for_each_end_state"),
        ("memory_app", "0002_memory_query_indexes"),
    ]

    operations = [
        migrations.AlterField(
            model_name="agent",
            name="role",
            field=models.CharField(
                choices=[
                    ("orchestrator", "Orchestrator"),
                    ("research", "Research"),
                    ("executor", "Executor"),
                    ("sidecar", "Sidecar"),
                ],
                max_length=16,
            ),
        ),
        migrations.RunPython(forwards, backwards),
    ]
