"""The controller's view of live brokers when it was elected before any broker registered — its
own broker among them, as a kbroker broker starts its controller before it registers: every
registration read afterwards is a broker joining (UpdateMetadata sent to it), never silently
taken as the initial set. (A suite run caught the race: the controller's own broker was never
told the cluster's metadata.)"""

from __future__ import annotations

import trio

from kbroker.controller import broker_requests as req
from kbroker.controller.context import ControllerContext
from kbroker.controller.controller import KafkaController
from kbroker.zookeeper import znodes as zk
from kbroker.zookeeper.znodes import BrokerRegistration
from test_log_dir_events import FakeBrokers, FakeSession, FakeZooKeeper, never_unclean


def test_brokers_registering_after_an_empty_election_are_joined():
    zoo, brokers = FakeZooKeeper(), FakeBrokers()
    controller = KafkaController(1, FakeSession(zoo), brokers.send, unclean_leader_election=never_unclean,
                                 auto_leader_rebalance=False)
    controller.ctx = ControllerContext(epoch=1, epoch_zk_version=0)  # elected: no broker registered yet

    async def scenario() -> None:
        async with trio.open_nursery() as nursery:
            controller.queues.attach(nursery)
            for broker_id in (1, 2):  # its own broker, then another, each a watch event
                zoo.nodes[zk.broker_path(broker_id)] = (
                    zk.encode_broker(BrokerRegistration(broker_id, "127.0.0.1", 9090 + broker_id)), 0)
                await controller._on_broker_change()
                assert sorted(controller.ctx.live_brokers) == list(range(1, broker_id + 1))
            with trio.fail_after(5):
                while {b for b, _ in brokers.sent(req.UPDATE_METADATA)} != {1, 2}:
                    await trio.sleep(0.01)
            nursery.cancel_scope.cancel()

    trio.run(scenario)
