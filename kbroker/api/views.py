"""How handlers see a filtered view: a topic name (and topic id) standing for its source's
partitions. Metadata reports the source's partitions under the view's name and id; Fetch reads the
source partition through the view's filter; ListOffsets, OffsetForLeaderEpoch and committed offsets
use the source partition; Produce is refused (INVALID_TOPIC_EXCEPTION, as for internal topics).
"""

from __future__ import annotations

import uuid

from kbroker.api.context import RequestContext
from kbroker.config import ConfigEntry, ConfigSource, ConfigType
from kbroker.errors import ErrorCode, InvalidTopicError
from kbroker.log.topic_partition import TopicPartition
from kbroker.metadata.views import ViewInfo
from kbroker.replica.manager import FetchPartitionResult
from kbroker.views.spec import CONFIG_DOCS, DEFAULT_TAGS_HEADER, VIEW_TAGS_HEADER


def source_of(ctx: RequestContext, topic: str) -> str:
    """The topic whose partitions `topic` names: its source for a view, else itself."""
    view = ctx.broker.views.view(topic)
    return view.source if view is not None else topic


def name_of_id(ctx: RequestContext, topic_id: uuid.UUID) -> str | None:
    info = ctx.broker.metadata.topic_by_id(topic_id)
    if info is not None:
        return info.name
    view = ctx.broker.views.view_by_id(topic_id)
    return view.name if view is not None else None


def refuse_produce(ctx: RequestContext, topic: str) -> None:
    view = ctx.broker.views.view(topic)
    if view is not None:
        raise InvalidTopicError(f"{topic} is a view of {view.source}: it cannot be produced to; "
                                f"produce to {view.source}")


async def read_partition(ctx: RequestContext, topic: str, partition: int, fetch_offset: int, max_bytes: int,
                         read_committed: bool, min_one_message: bool, replica_id: int,
                         current_leader_epoch: int) -> FetchPartitionResult:
    """A partition's Fetch read: a view's is its source's read through the filter; a read below a
    tiered partition's local log start is completed from the archive (before any filtering)."""
    rm = ctx.broker.replica_manager
    view = ctx.broker.views.view(topic)
    source = view.source if view is not None else topic
    result = rm.read_partition(TopicPartition(source, partition), fetch_offset, max_bytes, read_committed,
                               min_one_message=min_one_message, replica_id=-1 if view is not None else replica_id,
                               current_leader_epoch=current_leader_epoch)
    if result.remote_read is not None:
        await rm.read_remote(result)
    if view is not None:
        ctx.broker.view_reader.filter(view, partition, result)
    return result


def view_metadata(ctx: RequestContext, view: ViewInfo, topic_metadata, error_topic) -> dict:
    """The Metadata entry of a view: its source's partitions (leaders, replicas, ISR, epochs)."""
    source = ctx.broker.metadata.topic(view.source)
    if source is None:  # the source was deleted behind the view's back (straight in ZooKeeper)
        return error_topic(view.name, ErrorCode.unknown_topic_or_partition, view.topic_id)
    entry = topic_metadata(ctx, source)
    return {**entry, "name": view.name, "topic_id": view.topic_id, "is_internal": False}


def describe_view_config(view: ViewInfo) -> list[ConfigEntry]:
    """DescribeConfigs of a view: its three keys, read-only (a view is re-created to change)."""
    entries = []
    for key, value in sorted({**{VIEW_TAGS_HEADER: None}, **view.spec.configs}.items()):
        source = ConfigSource.DYNAMIC_TOPIC_CONFIG
        if value is None:
            value, source = DEFAULT_TAGS_HEADER, ConfigSource.DEFAULT_CONFIG
        entries.append(ConfigEntry(key, value, source, True, False, ConfigType.STRING, CONFIG_DOCS[key],
                                   ((key, value, source),)))
    return entries
