"""The admin: every model's pages render, and its actions go through the services."""

import pytest
from django.contrib import admin
from django.urls import reverse

from agents_app.models import AgentCommand
from agentsys.types import AgentStatus, RequestStatus
from hosts_app.models import Host, HostStatus
from memory_app.models import MemoryEntry
from scheduler_app.models import GPU, Alert, AlertStatus, Run, RunStatus, ScheduleRequest
from scheduler_app.runs import launch as runs
from sessions_app.models import ChatSession
from tests.factories import one_of_everything

pytestmark = pytest.mark.django_db

PROJECT_APPS = {
    "sessions_app",
    "events_app",
    "hosts_app",
    "agents_app",
    "scheduler_app",
    "memory_app",
}
MODELS = sorted(
    (m for m in admin.site._registry if m._meta.app_label in PROJECT_APPS),
    key=lambda m: m._meta.label,
)


def _url(model, view, *args):
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def test_every_project_model_is_in_the_admin():
    from django.apps import apps

    project_models = {m for m in apps.get_models() if m._meta.app_label in PROJECT_APPS}
    assert project_models == set(MODELS)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m._meta.label)
def test_changelist_renders_with_rows(admin_client, model):
    one_of_everything()
    response = admin_client.get(_url(model, "changelist"))
    assert response.status_code == 200
    assert response.context["cl"].result_count >= 1


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m._meta.label)
def test_changelist_search_and_filters_render(admin_client, model):
    one_of_everything()
    model_admin = admin.site._registry[model]
    response = admin_client.get(_url(model, "changelist"), {"q": "demo"})
    assert response.status_code == 200
    if model_admin.list_filter:
        assert response.context["cl"].has_filters


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m._meta.label)
def test_add_page_renders_or_is_forbidden_by_design(admin_client, model):
    response = admin_client.get(_url(model, "add"))
    if admin.site._registry[model].has_add_permission(response.wsgi_request):
        assert response.status_code == 200
    else:
        assert response.status_code == 403  # the event log is append-only


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m._meta.label)
def test_change_page_renders_with_pretty_json(admin_client, model):
    one_of_everything()
    obj = model.objects.first()
    response = admin_client.get(_url(model, "change", obj.pk))
    assert response.status_code == 200
    json_fields = [f.name for f in model._meta.fields if f.get_internal_type() == "JSONField"]
    for name in json_fields:
        # Shown indented in a <pre>, never as a raw editable textarea.
        assert f'name="{name}"' not in response.content.decode()
    if json_fields:
        assert b"<pre" in response.content


def test_cancel_action_cancels_queued_and_explains_the_rest(admin_client):
    rows = one_of_everything()
    running = ScheduleRequest.objects.create(
        agent_cls_path="x", status=RequestStatus.RUNNING, gpu_required=0
    )
    response = admin_client.post(
        _url(ScheduleRequest, "changelist"),
        {"action": "cancel", "_selected_action": [rows["request"].pk, running.pk]},
        follow=True,
    )
    text = response.content.decode()
    assert "Cancelled: 1" in text
    assert "only queued requests can be cancelled" in text
    assert ScheduleRequest.objects.get(pk=rows["request"].pk).status == RequestStatus.CANCELLED
    assert ScheduleRequest.objects.get(pk=running.pk).status == RequestStatus.RUNNING


def test_stop_action_records_command_and_refuses_finished_agents(admin_client):
    rows = one_of_everything()
    rows["l3"].status = AgentStatus.DONE
    rows["l3"].save()
    from agents_app.models import Agent

    response = admin_client.post(
        _url(Agent, "changelist"),
        {"action": "request_stop", "_selected_action": [rows["l1"].pk, rows["l3"].pk]},
        follow=True,
    )
    text = response.content.decode()
    assert "Stop requested" in text
    assert "runagentd carries it out" in text
    assert "is done; it no longer takes commands" in text
    assert AgentCommand.objects.filter(agent=rows["l1"], kind="stop").count() == 1
    assert not AgentCommand.objects.filter(agent=rows["l3"]).exists()


def test_alert_acknowledge_action(admin_client):
    rows = one_of_everything()
    admin_client.post(
        _url(Alert, "changelist"),
        {"action": "acknowledge", "_selected_action": [rows["alert"].pk]},
    )
    alert = Alert.objects.get(pk=rows["alert"].pk)
    assert alert.status == AlertStatus.RESOLVED
    assert alert.response == "acknowledge"
    assert alert.responded_by.username == "admin"


def test_memory_deactivate_action(admin_client):
    rows = one_of_everything()
    admin_client.post(
        _url(MemoryEntry, "changelist"),
        {"action": "deactivate", "_selected_action": [rows["memory"].pk]},
    )
    assert MemoryEntry.objects.get(pk=rows["memory"].pk).active is False


def test_host_mark_offline_and_session_archive_actions(admin_client):
    rows = one_of_everything()
    admin_client.post(
        _url(Host, "changelist"),
        {"action": "mark_offline", "_selected_action": [rows["host"].pk]},
    )
    assert Host.objects.get(pk=rows["host"].pk).status == HostStatus.OFFLINE
    admin_client.post(
        _url(ChatSession, "changelist"),
        {"action": "archive", "_selected_action": [rows["chat"].pk]},
    )
    assert ChatSession.objects.get(pk=rows["chat"].pk).archived is True


def test_steer_action_asks_for_context_then_steers(admin_client):
    rows = one_of_everything()
    from agents_app.models import Agent

    url = _url(Agent, "changelist")
    form_page = admin_client.post(url, {"action": "steer", "_selected_action": [rows["l1"].pk]})
    assert form_page.status_code == 200
    assert b'name="context"' in form_page.content
    admin_client.post(
        url,
        {
            "action": "steer",
            "apply": "1",
            "_selected_action": [rows["l1"].pk],
            "context": "try a smaller batch",
            "urgency": "priority",
        },
    )
    command = AgentCommand.objects.get(agent=rows["l1"], kind="steer")
    assert command.payload == {"context": "try a smaller batch", "urgency": "priority"}
    bad = admin_client.post(
        url,
        {
            "action": "steer",
            "apply": "1",
            "context": "",
            "_selected_action": [rows["l1"].pk],
            "urgency": "loud",
        },
    )
    assert bad.status_code == 200 and b"errorlist" in bad.content  # the form again, explained


# -- machine-managed state is read-only; actions instead (issue 9 item 14) --------------------


@pytest.mark.parametrize(
    ("key", "change"),
    [
        ("l3", {"status": "done", "pid": "4242", "host": "1", "error": ""}),
        ("request", {"status": "done", "gpu_indices": "0", "gpu_required": "0"}),
        ("alert", {"status": "resolved", "response": "stop", "severity": "info"}),
        ("command", {"status": "delivered", "kind": "stop"}),
        ("turn", {"status": "done"}),
    ],
)
def test_a_change_form_post_cannot_move_what_the_system_manages(admin_client, key, change):
    obj = one_of_everything()[key]
    before = {field: getattr(type(obj).objects.get(pk=obj.pk), field) for field in ("status",)}
    response = admin_client.post(_url(type(obj), "change", obj.pk), change)
    assert response.status_code == 403
    assert type(obj).objects.get(pk=obj.pk).status == before["status"]
    assert admin_client.get(_url(type(obj), "change", obj.pk)).status_code == 200  # a view


def test_a_host_form_changes_only_the_gpus_enabled_switch(admin_client):
    rows = one_of_everything()
    host, gpu = rows["host"], rows["gpu"]
    response = admin_client.post(
        _url(Host, "change", host.pk),
        {
            "name": "renamed",
            "status": HostStatus.DEAD,
            "daemon_pid": "4242",
            "gpus-TOTAL_FORMS": "1",
            "gpus-INITIAL_FORMS": "1",
            "gpus-MIN_NUM_FORMS": "0",
            "gpus-MAX_NUM_FORMS": "1000",
            "gpus-0-id": str(gpu.pk),
            "gpus-0-host": str(host.pk),
            "gpus-0-index": "7",
            "gpus-0-allocated_to": rows["request"].pk,
            # enabled left out: unticked
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    host.refresh_from_db()
    gpu.refresh_from_db()
    assert (host.name, host.status, host.daemon_pid) == ("gpu-box", HostStatus.ONLINE, None)
    assert (gpu.index, gpu.allocated_to_id, gpu.enabled) == (0, None, False)


def test_a_gpu_form_cannot_book_or_renumber_it(admin_client):
    rows = one_of_everything()
    gpu = rows["gpu"]
    response = admin_client.post(
        _url(GPU, "change", gpu.pk),
        {"enabled": "on", "index": "5", "allocated_to": rows["request"].pk, "host": "999"},
    )
    assert response.status_code == 302
    gpu.refresh_from_db()
    assert (gpu.index, gpu.allocated_to_id, gpu.host_id) == (0, None, rows["host"].pk)


def test_a_run_form_edits_a_ready_runs_command_but_never_its_status(admin_client):
    run = one_of_everything()["run"]
    fields = {
        "name": "renamed",
        "command": "python train.py --lr=1",
        "workdir": "",
        "gpu_required": 0,
    }
    response = admin_client.post(
        _url(Run, "change", run.pk), {**fields, "status": "done", "exit_code": "0"}
    )
    assert response.status_code == 302
    run.refresh_from_db()
    assert (run.name, run.status, run.exit_code) == ("renamed", RunStatus.READY, None)

    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
    admin_client.post(_url(Run, "change", run.pk), {**fields, "command": "rm -rf /"})
    assert Run.objects.get(pk=run.pk).command == "python train.py --lr=1"  # fixed once started


def test_run_actions_start_stop_and_rerun_through_the_services(admin_client, tmp_path, settings):
    settings.AGENTSYS_WORKDIR = tmp_path
    run = one_of_everything()["run"]
    Run.objects.filter(pk=run.pk).update(agent=None)
    url = _url(Run, "changelist")
    admin_client.post(url, {"action": "start_run", "_selected_action": [run.pk]})
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED
    assert run.workdir == str(tmp_path)  # made in the admin with no workdir: never the checkout
    assert ScheduleRequest.objects.get(agent_id=run.agent_id).status == RequestStatus.QUEUED
    admin_client.post(url, {"action": "stop_run", "_selected_action": [run.pk]})
    assert Run.objects.get(pk=run.pk).status == RunStatus.CANCELLED
    text = admin_client.post(
        url, {"action": "rerun", "_selected_action": [run.pk]}, follow=True
    ).content.decode()
    assert "Rerun as new runs: 1" in text
    assert Run.objects.filter(name=run.name, status=RunStatus.QUEUED).count() == 1


def test_alert_stop_action_answers_it_and_stops_its_run(admin_client, tmp_path, settings):
    settings.AGENTSYS_WORKDIR = tmp_path
    rows = one_of_everything()
    run = runs.start_run(run_id=rows["run"].pk)
    Alert.objects.filter(pk=rows["alert"].pk).update(run=run)
    admin_client.post(
        _url(Alert, "changelist"), {"action": "stop", "_selected_action": [rows["alert"].pk]}
    )
    alert = Alert.objects.get(pk=rows["alert"].pk)
    assert (alert.status, alert.response) == (AlertStatus.RESOLVED, "stop")
    assert Run.objects.get(pk=run.pk).status == RunStatus.CANCELLED  # it had not started
