"""The change notifications of entity configs: writing an entity's config znode and posting its
`/config/changes` notification (Kafka's AdminZkClient.changeConfigs), and purging the notifications
every broker has read (Kafka's ZkNodeChangeNotificationListener.purgeObsoleteNotifications):
sequential znodes under `/config/changes`, `/kafka-acl-changes` and `/kafka-acl-extended-changes` are
deleted once processed and older than 15 minutes, so the parents do not grow forever. Any broker may
purge; another broker deleting the same znode first is no error.
"""

from __future__ import annotations

import logging
import time

from kbroker.zookeeper import znodes as zk
from kbroker.zookeeper.znodes import NoNodeError, ZkError

logger = logging.getLogger(__name__)

CHANGE_EXPIRATION_MS = 15 * 60 * 1000  # Kafka's changeExpirationMs


def decoded_config(result, which: str, consequence: str) -> dict[str, str]:
    """An entity's config from a `get_many` result (None: no znode, an empty config); a znode that
    is not JSON is logged ("the config znode <which> is not JSON; <consequence>") and read as empty."""
    try:
        return zk.decode_config(result[0] if result else None)
    except ValueError:
        logger.warning("the config znode %s is not JSON; %s", which, consequence)
        return {}


async def write_config(session, client, path: str, data: bytes) -> None:
    """An entity's config znode set to `data`, created (with its parents) when missing."""
    try:
        await session.call(client.set, path, data)
    except zk.NoNodeError:
        try:
            await session.call(client.create, path, data, makepath=True)
        except zk.NodeExistsError:  # another broker created it meanwhile
            await session.call(client.set, path, data)


async def post_config_change(session, client, notification: bytes) -> None:
    """A sequential `/config/changes` notification (`zk.encode_config_change`) every broker acts on."""
    await session.call(client.create, f"{zk.CONFIG_CHANGES}/{zk.CONFIG_CHANGE_PREFIX}", notification, sequence=True)


def obsolete(children: list[str], last_processed: str, stats: list, now_ms: int) -> list[str]:
    """The notifications at or before `last_processed` created more than 15 minutes before `now_ms`."""
    out = []
    for name, result in zip(children, stats):
        ctime = getattr(result[1], "ctime", None) if result is not None else None
        if name <= last_processed and ctime is not None and now_ms - ctime > CHANGE_EXPIRATION_MS:
            out.append(name)
    return out


async def purge(session, client, parent: str, children: list[str], last_processed: str) -> int:
    """Delete the obsolete notifications among `children` of `parent`; returns how many went."""
    candidates = [c for c in children if c <= last_processed]
    if not candidates:
        return 0
    stats = await session.call(client.get_many, [f"{parent}/{c}" for c in candidates])
    doomed = obsolete(candidates, last_processed, stats, int(time.time() * 1000))
    for name in doomed:
        try:
            await session.call(client.delete, f"{parent}/{name}")
        except NoNodeError:
            pass  # another broker purged it
        except ZkError as exc:
            logger.warning("could not purge the change notification %s/%s: %s", parent, name, exc)
            break
    return len(doomed)
