"""Where each broker's schema registry answers, in a cluster: one ephemeral znode per broker,
`/kbroker/schema_registry/brokers/<id>`, holding its advertised URL (`schema.registry.advertised.url`,
else the listener's). A registry that does not lead `_schemas`-0 reads the leader's URL here to
forward a request; a broker that dies takes its znode with its session.
"""

from __future__ import annotations

import logging

import trio

from kbroker.zookeeper.znodes import NodeExistsError, NoNodeError

logger = logging.getLogger(__name__)

REGISTRY_URLS = "/kbroker/schema_registry/brokers"
MAX_URL_BYTES = 4096


def url_path(broker_id: int) -> str:
    return f"{REGISTRY_URLS}/{broker_id}"


async def publish(session, client, broker_id: int, url: str) -> None:
    """Write this broker's registry URL (ephemeral); a node of a dead earlier session is replaced
    once that session expires, a node of our own session is rewritten."""
    data = url.encode()
    path = url_path(broker_id)
    while True:
        try:
            await session.call(client.create, path, data, ephemeral=True, makepath=True)
            return
        except NodeExistsError:
            try:
                _, stat = await session.call(client.get, path)
            except NoNodeError:
                continue
            if stat.ephemeral_owner == client.session_id:
                await session.call(client.set, path, data)
                return
            await trio.sleep(0.5)


async def url_of(session, client, broker_id: int) -> str | None:
    """The registry URL broker `broker_id` published; None when it has none (or no session)."""
    try:
        data, _ = await session.call(client.get, url_path(broker_id))
    except NoNodeError:
        return None
    text = data[:MAX_URL_BYTES].decode("utf-8", "replace").strip()
    return text or None
