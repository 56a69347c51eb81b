"""agents.stage's receiving side without sockets: a worker waits for a step's inputs, and a peer
that closed its connection between flows has sent everything it will."""
import socket
import threading

import pytest

from agents import stage
from agents.stage import HEADER

CFG = {"flows": [{"name": "x", "src": 0, "dst": 2, "bytes": 10}, {"name": "y", "src": 1, "dst": 2, "bytes": 10}],
       "programs": {"2": [{"op": "R", "dur_s": 0.001, "inputs": [0, 1], "outputs": []}]}}


def receive(w, src, frames):
    """Feed ``frames`` [(step, flow index)] to worker ``w``'s receiver for ``src``, then close."""
    a, b = socket.socketpair()
    t = threading.Thread(target=w._receiver, args=(b, src), daemon=True)
    t.start()
    for step, idx in frames:
        a.sendall(HEADER.pack(step, idx, 1.0, 1.0, -1) + b"\0" * CFG["flows"][idx]["bytes"])
    a.close()
    t.join(5)
    b.close()


def test_a_peer_that_closed_after_its_last_flow_does_not_fail_the_step():
    w = stage.Worker(CFG, 2)
    receive(w, 0, [(0, 0)])                 # peer 0 sent its flow of step 0 and closed
    assert w.closed == {0} and not w.errors
    receive(w, 1, [(0, 1)])
    assert [g[0] for g in w.wait_inputs(0, [0, 1])] == [1.0, 1.0]


def test_a_missing_flow_of_a_closed_peer_fails_the_step():
    w = stage.Worker(CFG, 2)
    receive(w, 0, [])                       # closed without step 0's flow
    with pytest.raises(stage.ConnectionLost, match="peer closed"):
        w.wait_inputs(0, [0, 1])


def test_a_connection_cut_inside_a_flow_is_an_error():
    w = stage.Worker(CFG, 2)
    a, b = socket.socketpair()
    t = threading.Thread(target=w._receiver, args=(b, 0), daemon=True)
    t.start()
    a.sendall(HEADER.pack(0, 0, 1.0, 1.0, -1) + b"\0" * 4)        # 4 of the flow's 10 bytes
    a.close()
    t.join(5)
    b.close()
    assert w.errors and not w.closed
