"""Purging processed change notifications older than 15 minutes (kbroker/metadata/notifications.py),
against a stand-in ZooKeeper client whose znodes carry creation times."""

from types import SimpleNamespace

import trio

from kbroker.metadata import notifications
from kbroker.zookeeper.znodes import NoNodeError

MINUTE = 60_000


class Session:
    async def call(self, fn, *args):
        return fn(*args)


class Client:
    def __init__(self, ctimes: dict[str, int]) -> None:
        self.nodes = {path: SimpleNamespace(ctime=t) for path, t in ctimes.items()}

    def get_many(self, paths):
        return [(b"x", self.nodes[p]) if p in self.nodes else None for p in paths]

    def delete(self, path):
        if path not in self.nodes:
            raise NoNodeError(path)
        del self.nodes[path]


def test_only_processed_and_expired_notifications_go():
    now = 100 * MINUTE
    stats = [(b"", SimpleNamespace(ctime=now - 20 * MINUTE)), (b"", SimpleNamespace(ctime=now - 5 * MINUTE)),
             None, (b"", SimpleNamespace(ctime=now - 30 * MINUTE))]
    names = ["c_0001", "c_0002", "c_0003", "c_0009"]
    assert notifications.obsolete(names, "c_0003", stats, now) == ["c_0001"]  # c_0009: not processed yet


def test_purge_deletes_and_tolerates_another_broker_purging_first(monkeypatch):
    now = 100 * MINUTE
    monkeypatch.setattr(notifications.time, "time", lambda: now / 1000)
    client = Client({"/p/n_1": now - 16 * MINUTE, "/p/n_2": now - 16 * MINUTE, "/p/n_3": now - MINUTE})
    real_get_many = client.get_many

    def get_many_then_race(paths):
        out = real_get_many(paths)
        del client.nodes["/p/n_2"]  # another broker deletes it between our read and our delete
        return out

    client.get_many = get_many_then_race
    purged = trio.run(notifications.purge, Session(), client, "/p", ["n_1", "n_2", "n_3"], "n_3")
    assert purged == 2
    assert set(client.nodes) == {"/p/n_3"}


def test_a_config_znode_that_is_not_json_reads_as_empty_and_is_logged(caplog):
    """A config znode another tool wrote badly costs that entity its configs, never the broker:
    read as empty, with a warning naming it; a missing znode is an empty config, silently."""
    good = (b'{"version":1,"config":{"a":"1"}}', None)
    assert notifications.decoded_config(good, "of group 'g'", "its configs are ignored") == {"a": "1"}
    assert notifications.decoded_config(None, "of group 'g'", "its configs are ignored") == {}
    assert not caplog.records
    assert notifications.decoded_config((b"{not json", None), "of user 'u'", "its credentials are ignored") == {}
    assert [r.getMessage() for r in caplog.records] == [
        "the config znode of user 'u' is not JSON; its credentials are ignored"]
