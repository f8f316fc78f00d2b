"""A request's sync work runs on a thread of its own, taken from those earlier requests left
idle (researchagent.asgi_handler): never one still running what a cancelled request left behind."""

from __future__ import annotations

import threading

import httpx
import pytest

from researchagent.asgi_handler import RequestThreads
from tests.live_clients import TOKEN, Web


def test_an_idle_thread_is_used_again_and_a_busy_one_never():
    threads = RequestThreads(keep=4)
    first = threads.take()
    first.submit(lambda: None).result()
    threads.give_back(first)
    assert threads.take() is first  # no new thread for the next request

    release = threading.Event()
    first.submit(release.wait)  # what a cancelled request's sync view is still doing
    threads.give_back(first)
    second = threads.take()
    assert second is not first
    assert second.submit(lambda: 42).result(timeout=5) == 42  # not queued behind it
    release.set()
    first.shutdown(wait=True)  # given back busy, it was told to end once done


def test_past_the_idle_ones_kept_a_thread_ends_with_its_request():
    threads = RequestThreads(keep=1)
    one, two = threads.take(), threads.take()
    threads.give_back(one)
    threads.give_back(two)
    assert threads.take() is one and threads.take() is not two


@pytest.mark.django_db(transaction=True)
def test_requests_one_after_another_through_the_web_all_answer(tmp_path):
    web = Web()
    try:
        with httpx.Client(base_url=web.url, headers={"X-Auth-Token": TOKEN}) as client:
            codes = [
                client.post(
                    "/api/runs", json={"name": f"r{i}", "command": "true", "workdir": str(tmp_path)}
                ).status_code
                for i in range(30)
            ]
            listed = client.get("/api/runs", params={"limit": 100}).json()
    finally:
        web.stop()
    assert codes == [201] * 30
    assert sorted(run["name"] for run in listed) == sorted(f"r{i}" for i in range(30))
