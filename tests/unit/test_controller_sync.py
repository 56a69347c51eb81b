"""The controller counts a switch synced however os-ken's handshake and its own replies interleave.

os-ken moves an OpenFlow 1.3 switch to MAIN only when its port description arrives; a slow host
(the stock-kernel tier's guest) can deliver the reply to the controller's barrier first. These tests
route events through os-ken's own dispatch (``get_handlers(ev, state)``), as its event loop does.
"""
import json

import pytest
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, register_instance
from os_ken.ofproto import ofproto_v1_3, ofproto_v1_3_parser

from harness.routing import compute_routes
from topologies import dumbbell


class FakeDatapath:
    ofproto = ofproto_v1_3
    ofproto_parser = ofproto_v1_3_parser

    def __init__(self, dpid):
        self.id = dpid
        self.sent = []

    def send_msg(self, msg):
        self.sent.append(msg)


@pytest.fixture
def controller(tmp_path, monkeypatch):
    from controllers import fabric_app
    topo = dumbbell()
    fabric = {"topology": topo.to_dict(),
              "routes": {f"{s}>{d}": p for (s, d), p in compute_routes(topo, {}).items()},
              "control": str(tmp_path / "control.sock")}
    (tmp_path / "fabric.json").write_text(json.dumps(fabric))
    monkeypatch.setenv("INTERLEAVE_FABRIC", str(tmp_path / "fabric.json"))
    # no control socket and no hub thread: the events come from the test
    monkeypatch.setattr(fabric_app.hub, "StreamServer", lambda *a, **k: type("NoServer", (), {"serve_forever": None}))
    monkeypatch.setattr(fabric_app.hub, "spawn", lambda *a, **k: None)
    app = fabric_app.FabricController()
    register_instance(app)
    return app


def dispatch(app, ev, state):
    handlers = app.get_handlers(ev, state)
    for h in handlers:
        h(ev)
    return handlers


@pytest.mark.parametrize("state", [CONFIG_DISPATCHER, MAIN_DISPATCHER])
def test_barrier_reply_syncs_the_switch_in_either_state(controller, state):
    dp = FakeDatapath(1)
    assert dispatch(controller, ofp_event.EventOFPSwitchFeatures(ofproto_v1_3_parser.OFPSwitchFeatures(dp)),
                    CONFIG_DISPATCHER)
    assert isinstance(dp.sent[-1], ofproto_v1_3_parser.OFPBarrierRequest)
    assert 1 not in controller.synced
    dispatch(controller, ofp_event.EventOFPBarrierReply(ofproto_v1_3_parser.OFPBarrierReply(dp)), state)
    assert 1 in controller.synced
    assert controller.installed[1] == controller.table[1]


def test_a_barrier_reply_nobody_waits_for_syncs_nothing(controller):
    dp = FakeDatapath(2)
    dispatch(controller, ofp_event.EventOFPBarrierReply(ofproto_v1_3_parser.OFPBarrierReply(dp)), CONFIG_DISPATCHER)
    assert controller.synced == set()


def test_a_switch_whose_id_os_ken_has_not_set_yet_is_known_by_its_features(controller):
    """os-ken's own handler of the features reply sets the datapath's id, in another app's thread,
    so the controller's may run first; filed under None, a switch would never be synced, and the
    control socket's status would fail sorting the ids (the error the stock-kernel tier's guest
    once showed: int against None). The controller takes the id from the reply."""
    dp = FakeDatapath(None)
    features = ofproto_v1_3_parser.OFPSwitchFeatures(dp, datapath_id=2)
    dispatch(controller, ofp_event.EventOFPSwitchFeatures(features), CONFIG_DISPATCHER)
    assert dp.id == 2 and set(controller.datapaths) == {2}
    assert isinstance(dp.sent[-1], ofproto_v1_3_parser.OFPBarrierRequest)
    dispatch(controller, ofp_event.EventOFPBarrierReply(ofproto_v1_3_parser.OFPBarrierReply(dp)), CONFIG_DISPATCHER)
    assert controller.synced == {2}
