"""Hypothesis strategies for KIP-951's response fields (Produce and Fetch tests share them)."""

from hypothesis import strategies as st

leaders = st.fixed_dictionaries({"leader_id": st.integers(0, 2**31 - 1), "leader_epoch": st.integers(0, 2**31 - 1)})
endpoints = st.lists(st.fixed_dictionaries({
    "node_id": st.integers(0, 2**31 - 1), "host": st.text(min_size=1, max_size=20), "port": st.integers(0, 65535),
    "rack": st.one_of(st.none(), st.text(max_size=5))}), min_size=1, max_size=3)
