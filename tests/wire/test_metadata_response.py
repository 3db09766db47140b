from hypothesis import given, settings, strategies as st

from kbroker.wire.metadata_response import encode_metadata_response
from kbroker.wire.protocol import RequestHeader, build_response, encode_response

node_ids = st.lists(st.integers(0, 2**31 - 1), max_size=4)
responses = st.fixed_dictionaries({
    "throttle_time": st.integers(0, 10_000),
    "brokers": st.lists(st.fixed_dictionaries({
        "node_id": st.integers(0, 1000), "host": st.text(max_size=20), "port": st.integers(0, 65535),
        "rack": st.one_of(st.none(), st.text(max_size=5))}), max_size=3),
    "cluster_id": st.one_of(st.none(), st.text(max_size=22)),
    "controller_id": st.integers(-1, 1000),
    "topics": st.lists(st.fixed_dictionaries({
        "error_code": st.sampled_from([0, 3, 5, 17]),
        "name": st.text(max_size=20),
        "topic_id": st.uuids(),
        "is_internal": st.booleans(),
        "partitions": st.lists(st.fixed_dictionaries({
            "error_code": st.sampled_from([0, 5]), "partition_index": st.integers(0, 2**31 - 1),
            "leader_id": st.integers(-1, 1000), "leader_epoch": st.integers(-1, 1000),
            "replica_nodes": node_ids, "isr_nodes": node_ids, "offline_replicas": node_ids}), max_size=4),
        "topic_authorized_operations": st.integers(-(2**31), 2**31 - 1)}), max_size=4),
    "cluster_authorized_operations": st.integers(-(2**31), 2**31 - 1),
})


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 12), st.integers(-(2**31), 2**31 - 1), responses)
def test_matches_kio_byte_for_byte(version, correlation_id, data):
    header = RequestHeader(3, version, correlation_id, None, version >= 9)
    assert encode_metadata_response(version, correlation_id, data) == encode_response(header, build_response(header, data))
