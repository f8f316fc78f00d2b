"""The queue page under backfill (scheduler_app.queue.backfill_reasons) on rows a real
PostgreSQL holds: the blocked head says where and when its GPUs are kept for it, a run that
would delay that says why it waits, one that may start ahead does not wait on it, and a
backfilled run says why it started."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from agentsys.backfill import clock
from scheduler_app.models import ScheduleRequest
from tests.integration.test_host_board import a_host, a_run, place, reasons, request_of

pytestmark = pytest.mark.django_db


def _limited(seconds):
    return {"executor_options": {"stop_when": [{"wall_seconds": seconds}]}}


def _started_ago(run, seconds):
    ScheduleRequest.objects.filter(pk=request_of(run).pk).update(
        started_at=timezone.now() - timedelta(seconds=seconds)
    )


def test_the_head_holds_a_reservation_and_later_runs_say_whether_they_wait_on_it(
    agentsys_config, client, admin_user
):
    agentsys_config(scheduler_policy="backfill")
    slow, fast = a_host("gpu-slow", gpus=2), a_host("gpu-fast", gpus=2)
    place(a_run("slow holder", **_limited(7200)), slow, [0])
    fast_holder = place(a_run("fast holder", **_limited(900)), fast, [0])
    _started_ago(fast_holder, 300)  # it ends in 10 minutes
    a_run("head", gpus=2)
    a_run("no limit", gpus=1)
    a_run("short", gpus=1, **_limited(60))
    a_run("long", gpus=1, **_limited(3600))

    at = clock(request_of(fast_holder).started_at.timestamp() + 900)
    said = reasons()
    assert said["head"] == (
        "no host with 2 free GPUs; largest has 1 free (gpu-fast: 1 free of 2, gpu-slow: 1 free "
        f"of 2); kept for it: gpu-fast frees 2 GPUs at {at}"
    )
    # gpu-slow has a free GPU the head does not wait for: the others fit there.
    assert "reservation" not in said["no limit"]
    place(a_run("slow second"), slow, [1])
    said = reasons()
    assert said["no limit"] == (
        f"would delay the reservation (gpu-fast frees 2 GPUs at {at}); it has no time limit"
    )
    assert "reservation" not in said["short"]  # 60 s ends before: the next claim starts it
    assert said["long"] == (
        f"would delay the reservation (gpu-fast frees 2 GPUs at {at}); "
        "its time limit ends after that"
    )

    client.force_login(admin_user)
    page = client.get("/queue/").content.decode()
    assert f"kept for it: gpu-fast frees 2 GPUs at {at}" in page
    assert "policy <code>backfill</code>" in page
    # A script reads the same reasons, in the order claims take the queue.
    waiting = client.get("/api/scheduler/waiting").json()
    assert [w["name"] for w in waiting] == ["head", "no limit", "short", "long"]
    assert [w["position"] for w in waiting] == [1, 2, 3, 4]
    assert waiting[0]["reason"].endswith(f"kept for it: gpu-fast frees 2 GPUs at {at}")
    assert waiting[0]["gpu_required"] == 2 and waiting[0]["run_id"].startswith("run-")
    assert waiting[3]["reason"] == said["long"]
    assert client.get("/api/scheduler/waiting?limit=0").status_code == 422


def test_with_no_time_limit_known_the_head_holds_the_host_with_most_free(agentsys_config):
    agentsys_config(scheduler_policy="backfill")
    host = a_host("gpu-a", gpus=4)
    place(a_run("holder"), host, [0])
    a_run("needs four", gpus=4)
    a_run("short", gpus=1, **_limited(10))
    said = reasons()
    assert said["needs four"] == (
        "no host with 4 free GPUs; largest has 3 free (gpu-a: 3 free of 4); "
        "kept for it: gpu-a frees 4 GPUs when its runs end"
    )
    assert said["short"] == (
        "would delay the reservation (gpu-a frees 4 GPUs when its runs end); no run there has "
        "a time limit, so nothing may start before it"
    )
