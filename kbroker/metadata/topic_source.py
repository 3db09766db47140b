"""The group coordinator's view of the cluster's topics (TopicSource, group/consumer.py): partition
counts, ids and names — of topics and of filtered views, which are topics to the groups too — and
the racks of each partition's replicas, read through from the metadata store at each use."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from kbroker.metadata.store import INTERNAL_TOPICS, TopicInfo


class PartitionCounts(Mapping[str, int]):
    """topic -> partition count, read through from the metadata's live topics and the filtered
    views (a view has its source's partitions) — a heartbeat asks for one or two topics; copying
    every topic's count for it would cost as many topics as there are."""

    __slots__ = ("_topics", "_views")

    def __init__(self, topics: Mapping[str, TopicInfo], views: Mapping | None = None) -> None:
        self._topics = topics
        self._views = views or {}

    def __getitem__(self, name: str) -> int:
        info = self._topics.get(name)
        if info is not None:
            return info.num_partitions
        view = self._views.get(name)
        source = self._topics.get(view.source) if view is not None else None
        if source is None:
            raise KeyError(name)
        return source.num_partitions

    def __contains__(self, name: object) -> bool:
        if name in self._topics:
            return True
        view = self._views.get(name)
        return view is not None and view.source in self._topics

    def __iter__(self) -> Iterator[str]:
        yield from self._topics
        yield from (name for name, view in self._views.items() if view.source in self._topics)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class MetadataTopics:
    """The group coordinator's view of the topics (consumer-protocol assignments): partition counts,
    ids, and the racks of each partition's replicas."""

    def __init__(self, metadata, views=None) -> None:
        self.metadata = metadata
        self.views = views  # the filtered views' catalogue: views are topics to the groups too

    def partition_counts(self) -> Mapping[str, int]:
        return PartitionCounts(self.metadata.topics(), self.views.views() if self.views is not None else None)

    def topic_id(self, name: str):
        info = self.metadata.topic(name)
        if info is None and self.views is not None:
            info = self.views.view(name)
        return None if info is None else info.topic_id

    def topic_name(self, topic_id) -> str | None:
        info = self.metadata.topic_by_id(topic_id)
        if info is None and self.views is not None:
            info = self.views.view_by_id(topic_id)
        return None if info is None else info.name

    def internal_topics(self) -> frozenset[str]:
        return INTERNAL_TOPICS

    def partition_racks(self, topic: str, partition: int) -> frozenset[str]:
        info = self.metadata.topic(topic)
        if info is None or not 0 <= partition < info.num_partitions:
            return frozenset()
        racks = {b.node_id: b.rack for b in self.metadata.brokers()}
        return frozenset(r for r in (racks.get(node) for node in info.assignment[partition]) if r)
