"""Purging the change notifications every broker has read (Kafka's
ZkNodeChangeNotificationListener.purgeObsoleteNotifications): sequential znodes under
`/config/changes`, `/kafka-acl-changes` and `/kafka-acl-extended-changes` are deleted once processed
and older than 15 minutes, so the parents do not grow forever. Any broker may purge; another broker
deleting the same znode first is no error.
"""

from __future__ import annotations

import logging
import time

from kbroker.zookeeper.znodes import NoNodeError, ZkError

logger = logging.getLogger(__name__)

CHANGE_EXPIRATION_MS = 15 * 60 * 1000  # Kafka's changeExpirationMs


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
