"""What the queue page says each waiting request waits for: the claim's rules replayed."""

from agentsys.scheduling import HostCapacity, QueuedRequest, waiting_reasons


def host(name="a", *, alive=True, total=2, free=2):
    return HostCapacity(name=name, alive=alive, total=total, free=free)


def ask(*needs):
    return [QueuedRequest(f"q{n}", need) for n, need in enumerate(needs)]


def test_free_gpus_go_in_order_and_the_rest_wait_for_them():
    reasons = waiting_reasons(ask(1, 1, 1), [host(total=2, free=2)], "fifo")
    assert "free on a" in reasons["q0"] and "free on a" in reasons["q1"]
    assert reasons["q2"] == "Not enough free GPUs: needs 1, a has 0 free"


def test_fifo_lets_a_small_request_pass_a_big_one_and_reserve_does_not():
    queue, hosts = ask(2, 1), [host(total=2, free=1)]
    fifo = waiting_reasons(queue, hosts, "fifo")
    assert fifo["q0"] == "Not enough free GPUs: needs 2, a has 1 free"
    assert "free on a" in fifo["q1"]
    reserve = waiting_reasons(queue, hosts, "reserve")
    assert reserve["q1"] == "Behind the head reservation of q0"


def test_a_gpu_less_request_passes_a_reservation():
    reasons = waiting_reasons(ask(2, 0), [host(total=2, free=1)], "reserve")
    assert reasons["q1"] == "Needs no GPU: the next claim starts it"


def test_too_big_for_every_live_host_and_a_dead_host_that_could_take_it():
    reasons = waiting_reasons(ask(4), [host(total=2), host("big", alive=False, total=8)], "fifo")
    assert reasons["q0"] == "Host down: only big has 4 GPUs"
    reasons = waiting_reasons(ask(4), [host(total=2)], "fifo")
    assert reasons["q0"] == "Needs 4 GPUs; the largest live host has 2"


def test_no_live_host_at_all():
    reasons = waiting_reasons(ask(0, 1), [host(alive=False)], "fifo")
    assert reasons["q0"] == reasons["q1"] == "No live host (runagentd down; hosts: a)"
    assert "none registered" in waiting_reasons(ask(1), [], "fifo")["q0"]
