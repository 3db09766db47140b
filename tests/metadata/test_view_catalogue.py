"""The single node's catalogue of views: persisted across restarts, names unique."""

import pytest
import trio

from kbroker.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError
from kbroker.metadata.views import LocalViewCatalogue, decode_view
from kbroker.views.spec import view_spec


def test_views_survive_a_restart_and_are_found_by_name_id_and_source(tmp_path):
    async def main():
        catalogue = LocalViewCatalogue(tmp_path)
        spec = view_spec({"view.source": "orders", "view.filter": "any(eu)", "view.tags.header": "labels"})
        view = await catalogue.create("orders-eu", spec)
        with pytest.raises(TopicAlreadyExistsError):
            await catalogue.create("orders-eu", spec)
        again = LocalViewCatalogue(tmp_path)
        assert again.view("orders-eu") == view and again.view_by_id(view.topic_id) == view
        assert again.views_of("orders") == ["orders-eu"] and again.view("orders-eu").spec.tags_header == "labels"
        await again.delete("orders-eu")
        with pytest.raises(UnknownTopicOrPartitionError):
            await again.delete("orders-eu")
        assert LocalViewCatalogue(tmp_path).views() == {}
    trio.run(main)


def test_an_unreadable_definition_is_ignored_not_fatal():
    assert decode_view("v", b"{not json") is None
    assert decode_view("v", b'{"topic_id": "00000000-0000-0000-0000-000000000001", "configs": {"view.filter": "any("}}') is None
