"""`kbroker share-groups` against a real in-process broker with share groups on, reached through a
local socket (each frame handed to the dispatch table), its members made with the raw
ShareGroupHeartbeat: list (with and without --state), describe (offsets, members, state, verbose),
reset-offsets (refused with members, dry run, executed and seen by DescribeShareGroupOffsets),
delete-offsets, delete, and the refusals: unknown group, a group of another type, share groups off,
options that do not go together; and the AdminClient share-group calls the command (and the
console) rest on."""

from __future__ import annotations

import functools
import socket
import struct
import threading
import time

import pytest
import trio

from kbroker.admin.client import AdminClient, KafkaErrorResponse, NotServed
from kbroker.api.dispatch import handle_frame
from kbroker.broker import Broker
from kbroker.cli import main
from kbroker.config import BrokerConfig
from kbroker.errors import ErrorCode as E
from kbroker.wire.fetch_response import frame_bytes
from kbroker.wire.protocol import decode_response, encode_request
from kbroker.wire.records import Record, build_batch

SHARE_ON = {"group.coordinator.rebalance.protocols": "classic,consumer,share",
            "group.share.session.timeout.ms": "45000"}
HEARTBEAT, PRODUCE = 76, 0


class SocketBroker:
    """A started single-node broker advertising a local port; each request frame on that port goes
    through the dispatch table (one at a time)."""

    def __init__(self, path, **extra: str) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.lock = threading.Lock()
        self.broker = Broker(BrokerConfig.from_dict({"log.dirs": str(path), "offsets.topic.num.partitions": "3",
                                                     **extra}), ("127.0.0.1", self.port))
        self.broker.startup()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._conn, args=(conn,), daemon=True).start()

    def _conn(self, conn: socket.socket) -> None:
        with conn:
            while True:
                try:
                    raw = conn.recv(4, socket.MSG_WAITALL)
                    if len(raw) < 4:
                        return
                    frame = conn.recv(struct.unpack(">i", raw)[0], socket.MSG_WAITALL)
                    with self.lock:
                        response = trio.run(handle_frame, self.broker, bytearray(frame))
                    if response:
                        conn.sendall(frame_bytes(response))
                except OSError:
                    return

    def ask(self, key: int, version: int, body: dict):
        frame = encode_request(key, version, 7, "test", body)
        with self.lock:
            response = frame_bytes(trio.run(handle_frame, self.broker, bytearray(frame[4:])))
        _corr, decoded = decode_response(key, version, response[4:])
        return decoded

    def create_topic(self, name: str, partitions: int) -> None:
        with self.lock:
            trio.run(functools.partial(self.broker.create_topic, name, num_partitions=partitions))

    def close(self) -> None:
        self.sock.close()
        self.broker.shutdown()


@pytest.fixture
def kb(tmp_path):
    b = SocketBroker(tmp_path, **SHARE_ON)
    b.create_topic("t", 2)
    yield b
    b.close()


def beat(kb, member, epoch, group="sg", topics=("t",)):
    r = kb.ask(HEARTBEAT, 1, {"group_id": group, "member_id": member, "member_epoch": epoch, "rack_id": None,
                              "subscribed_topic_names": list(topics) if epoch == 0 else None})
    assert r.error_code == E.none, r
    return r


def produce(kb, partition, n):
    batch = build_batch([Record(i, 1_000, None, b"v%d" % i, []) for i in range(n)])
    body = {"transactional_id": None, "acks": 1, "timeout": 5000,
            "topic_data": [{"name": "t", "partition_data": [{"index": partition, "records": batch}]}]}
    assert kb.ask(PRODUCE, 9, body).responses[0].partition_responses[0].error_code == E.none


def run(kb, capsys, *args):
    code = main(["share-groups", "--bootstrap-server", kb.bootstrap, "--timeout", "5", *args])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err.splitlines()


def rows(lines):
    return [line.split() for line in lines if line.strip()]


def test_list_shows_share_groups_only(kb, capsys):
    assert run(kb, capsys, "--list") == (0, [], [])
    beat(kb, "a", 0)
    with AdminClient(kb.bootstrap, 5) as client:  # a classic group: not listed
        client.commit_offsets("cg", {("t", 0): 0})
    assert run(kb, capsys, "--list") == (0, ["sg"], [])
    code, out, _ = run(kb, capsys, "--list", "--state")
    assert code == 0 and rows(out) == [["GROUP", "STATE"], ["sg", "Stable"]]
    code, out, _ = run(kb, capsys, "--list", "--state", "empty")
    assert code == 0 and rows(out) == [["GROUP", "STATE"]]
    code, _, err = run(kb, capsys, "--list", "--state", "Rebalancing")
    assert code == 1 and err == [("kbroker share-groups: Invalid state list 'Rebalancing'. "
                                 "Valid states are: Empty, Stable, Dead")]


def test_describe_members_and_state(kb, capsys):
    beat(kb, "member-a", 0)
    code, out, _ = run(kb, capsys, "--describe", "--group", "sg", "--members")
    assert code == 0 and rows(out) == [["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"],
                                       ["sg", "member-a", *rows(out)[1][2:3], "test", "2", "t:0,1"]]
    code, out, _ = run(kb, capsys, "--describe", "--group", "sg", "--members", "--verbose")
    assert rows(out)[0][5] == "MEMBER-EPOCH" and rows(out)[1][-2:] == ["1", "t:0,1"]
    code, out, _ = run(kb, capsys, "--describe", "--group", "sg", "--state")
    assert code == 0 and rows(out)[0] == ["GROUP", "COORDINATOR", "(ID)", "STATE", "#MEMBERS"]
    assert rows(out)[1] == ["sg", f"127.0.0.1:{kb.port}", "(0)", "Stable", "1"]
    code, out, _ = run(kb, capsys, "--describe", "--group", "sg", "--state", "--verbose")
    assert rows(out)[0][-3:] == ["GROUP-EPOCH", "ASSIGNMENT-EPOCH", "#MEMBERS"]
    assert rows(out)[1][-4:] == ["Stable", "1", "1", "1"]


def test_reset_is_refused_while_the_group_has_members_then_executes(kb, capsys):
    produce(kb, 0, 5)
    beat(kb, "a", 0)
    code, out, err = run(kb, capsys, "--reset-offsets", "--group", "sg", "--topic", "t:0", "--to-offset", "2",
                         "--execute")
    assert (code, out) == (1, [])
    assert err == [("kbroker share-groups: Share group 'sg' is not empty (state Stable, 1 members); "
                   "stop its consumers first: NON_EMPTY_GROUP")]
    beat(kb, "a", -1)  # leaves: the group is Empty
    code, out, err = run(kb, capsys, "--reset-offsets", "--group", "sg", "--topic", "t:0", "--to-offset", "2")
    assert code == 0 and rows(out) == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], ["sg", "t", "0", "2"]]
    assert "Dry run" in err[-1]
    assert run(kb, capsys, "--describe", "--group", "sg")[1] == ["Share group 'sg' has no offset information."]
    code, out, err = run(kb, capsys, "--reset-offsets", "--group", "sg", "--topic", "t:0", "--to-offset", "2",
                         "--execute")
    assert code == 0 and rows(out)[1] == ["sg", "t", "0", "2"] and err == []
    code, out, err = run(kb, capsys, "--describe", "--group", "sg")
    assert code == 0 and rows(out) == [["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"],
                                       ["sg", "t", "0", "2", "3"]]
    assert err == ["Share group 'sg' has no active members."]
    code, out, _ = run(kb, capsys, "--reset-offsets", "--group", "sg", "--to-latest", "--execute")  # its partitions
    assert code == 0 and rows(out)[1:] == [["sg", "t", "0", "5"]]
    assert rows(run(kb, capsys, "--describe", "--group", "sg")[1])[1] == ["sg", "t", "0", "5", "0"]
    code, out, _ = run(kb, capsys, "--reset-offsets", "--group", "sg", "--topic", "t", "--to-earliest", "--execute")
    assert code == 0 and rows(out)[1:] == [["sg", "t", "0", "0"], ["sg", "t", "1", "0"]]
    code, out, _ = run(kb, capsys, "--describe", "--group", "sg", "--verbose")
    assert rows(out)[0] == ["GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET", "LAG"]
    assert [r[4:] for r in rows(out)[1:]] == [["0", "5"], ["0", "0"]]


def test_delete_offsets_and_delete(kb, capsys):
    beat(kb, "a", 0)
    code, _, err = run(kb, capsys, "--delete", "--group", "sg")
    assert code == 1 and err == [("kbroker share-groups: Group 'sg' could not be deleted due to: "
                                 "Share group 'sg' is not EMPTY (state Stable): NON_EMPTY_GROUP")]
    code, _, err = run(kb, capsys, "--delete-offsets", "--group", "sg", "--topic", "t")
    assert code == 1 and err == [("kbroker share-groups: Share group 'sg' is not empty; stop its consumers first: "
                                 "NON_EMPTY_GROUP")]
    beat(kb, "a", -1)
    assert run(kb, capsys, "--reset-offsets", "--group", "sg", "--topic", "t", "--to-earliest", "--execute")[0] == 0
    code, out, _ = run(kb, capsys, "--delete-offsets", "--group", "sg", "--topic", "t")
    assert code == 0 and rows(out) == [["TOPIC", "STATUS"], ["t", "Successful"]]
    assert run(kb, capsys, "--describe", "--group", "sg")[1] == ["Share group 'sg' has no offset information."]
    code, out, err = run(kb, capsys, "--delete", "--group", "sg")
    assert (code, out, err) == (0, ["Deletion of requested share groups ('sg') was successful."], [])
    assert run(kb, capsys, "--list") == (0, [], [])
    code, _, err = run(kb, capsys, "--describe", "--group", "sg")
    assert code == 1 and err == [("kbroker share-groups: Share group 'sg' does not exist (ShareGroupDescribe): "
                                 "GROUP_ID_NOT_FOUND")]


def test_unknown_and_other_groups_are_refused(kb, capsys):
    with AdminClient(kb.bootstrap, 5) as client:
        client.commit_offsets("cg", {("t", 0): 0})
    code, out, err = run(kb, capsys, "--describe", "--group", "cg", "--members")
    assert (code, out) == (1, []) and err == [("kbroker share-groups: Group 'cg' is not a share group "
                                              "(it is a classic group): GROUP_ID_NOT_FOUND")]
    code, _, err = run(kb, capsys, "--reset-offsets", "--group", "cg", "--topic", "t", "--to-earliest")
    assert code == 1 and "not a share group" in err[0]
    code, _, err = run(kb, capsys, "--delete", "--group", "cg", "--group", "nobody")
    assert code == 1 and err == [
        ("kbroker share-groups: Group 'cg' could not be deleted due to: Group 'cg' is not a share group: "
        "GROUP_ID_NOT_FOUND"),
        ("kbroker share-groups: Group 'nobody' could not be deleted due to: Group 'nobody' is not a share group: "
        "GROUP_ID_NOT_FOUND")]
    code, _, err = run(kb, capsys, "--describe", "--group", "nobody", "--state")
    assert code == 1 and err == [("kbroker share-groups: Share group 'nobody' does not exist (ShareGroupDescribe): "
                                 "GROUP_ID_NOT_FOUND")]


@pytest.mark.parametrize("args, message", [
    (["--reset-offsets", "--group", "g", "--topic", "t"], "option --reset-offsets needs one of"),
    (["--describe"], "option --group is required"),
    (["--delete-offsets", "--group", "g"], "option --delete-offsets needs --topic"),
    (["--list", "--to-earliest"], "go with --reset-offsets"),  # nothing ignored silently
    (["--describe", "--group", "g", "--execute"], "options --execute and --dry-run go with --reset-offsets"),
])
def test_options_that_do_not_go_together(capsys, args, message):
    code = main(["share-groups", "--bootstrap-server", "127.0.0.1:1", *args])
    err = capsys.readouterr().err
    assert code == 1 and len(err.splitlines()) == 1 and err.startswith("kbroker share-groups: ")
    if message:
        assert message in err


def test_share_groups_off_says_how_to_turn_them_on(tmp_path, capsys):
    b = SocketBroker(tmp_path)
    try:
        code, _, err = run(b, capsys, "--describe", "--group", "sg")
    finally:
        b.close()
    assert code == 1 and err == [(f"kbroker share-groups: the broker at 127.0.0.1:{b.port} does not serve "
                                 "ShareGroupDescribe (share groups are off: start the broker with "
                                 "group.coordinator.rebalance.protocols=classic,consumer,share)")]


def test_the_admin_clients_share_group_calls(kb):
    beat(kb, "a", 0)
    with AdminClient(kb.bootstrap, 5) as client:
        client.commit_offsets("cg", {("t", 0): 0})  # a classic group: not a share group
        assert [(g.group_id, g.state, g.group_type) for g in client.list_share_groups()] == [("sg", "Stable", "share")]
        assert client.list_share_groups(["Empty"]) == []
        desc = client.describe_share_group("sg")
        assert (desc.state, [(m.member_id, m.client_id, m.assignment) for m in desc.members]) == \
            ("Stable", [("a", "test", (("t", (0, 1)),))])
        assert desc.coordinator.port == kb.port
        assert client.describe_share_group("cg") is None and client.describe_share_group_offsets("nobody") is None
        with pytest.raises(KafkaErrorResponse) as refused:
            client.alter_share_group_offsets("sg", {("t", 0): 0})
        assert refused.value.name == "NON_EMPTY_GROUP"
        beat(kb, "a", -1)
        client.alter_share_group_offsets("sg", {("t", 1): 0})
        assert {(o.topic, o.partition): o.start_offset for o in client.describe_share_group_offsets("sg")}[("t", 1)] == 0
        assert client.delete_share_group_offsets("sg", ["t", "t"]) == {"t": None}


def test_share_calls_are_not_retried_where_share_groups_are_off(tmp_path):
    b = SocketBroker(tmp_path)
    try:
        with AdminClient(b.bootstrap, 30) as client:
            started = time.monotonic()
            with pytest.raises(NotServed, match="does not serve DescribeShareGroupOffsets"):
                client.describe_share_group_offsets("sg")
            assert time.monotonic() - started < 5  # said at once, not after the 30 s retry budget
    finally:
        b.close()
