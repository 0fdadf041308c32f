"""The DES's shared resources (``engine/des_resources.py``) on their own: a hop's ports are
granted all or none, waiting transfers are granted oldest first among those whose ports are all
free, and slots and token queues hand over in arrival order."""

from __future__ import annotations

import simpy

from accel_sim.engine.des_resources import Port, Ports, Slots, Tokens


def test_a_transfer_never_holds_one_port_while_it_waits_for_another():
    env = simpy.Environment()
    arbiter, hbm, l2w, l0c = Ports(env), Port(), Port(), Port()
    assert arbiter.acquire((l2w, l0c), "store") is None  # an output tile enters L2
    wait = arbiter.acquire((hbm, l2w), "load")  # a load into L2 must wait for L2's write port
    assert wait is not None and hbm.holder is None  # ... without holding HBM meanwhile
    assert arbiter.acquire((hbm,), "store to HBM") is None  # so HBM serves someone else
    arbiter.release(l2w)
    assert not wait.triggered  # HBM is still busy: the load gets both or nothing
    arbiter.release(hbm)
    assert wait.triggered and hbm.holder == l2w.holder == "load"
    assert arbiter.state() == ()


def test_waiting_transfers_are_granted_oldest_first():
    env = simpy.Environment()
    arbiter, a, b = Ports(env), Port(), Port()
    assert arbiter.acquire((a,), "first") is None
    older = arbiter.acquire((a, b), "older")
    younger = arbiter.acquire((a,), "younger")
    assert arbiter.state() == ("older", "younger")
    arbiter.release(a)
    assert older.triggered and not younger.triggered  # both could go: the older one does
    assert arbiter.state() == ("younger",)


def test_a_younger_transfer_passes_one_still_waiting_for_its_other_port():
    env = simpy.Environment()
    arbiter, a, b = Ports(env), Port(), Port()
    arbiter.acquire((a,), "x")
    arbiter.acquire((b,), "y")
    older = arbiter.acquire((a, b), "older")
    younger = arbiter.acquire((a,), "younger")
    arbiter.release(a)
    assert younger.triggered and not older.triggered and a.holder == "younger"


def test_slots_and_tokens_hand_over_in_arrival_order():
    env = simpy.Environment()
    slots = Slots(env, 1)
    assert slots.take() is None
    first, second = slots.take(), slots.take()
    slots.free()
    assert first.triggered and not second.triggered and slots.level == 0
    queue = Tokens(env, 1)
    assert queue.put((0, 0)) is None
    waiting = queue.put((1, 5))
    assert waiting is not None and queue.bounds() == [0, 1]
    assert queue.get() == (0, 0) and waiting.triggered and queue.get() == (1, 5)
