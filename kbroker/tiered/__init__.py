"""Tiered storage (Kafka's KIP-405): closed segments archived to a store, history served from it.

Pure core: `manifest.py` (which segments one partition's archive holds, and its file format),
`decisions.py` (what to copy, what to expire), `reader.py` (finding batches and timestamps in an
archived segment through a byte-range reader). Stores (blocking, run in worker threads):
`store.py` (the interface and the built-in directory store), `s3.py` (the `s3` extra). Shell:
`manager.py`, the remote log manager task and the reads the replica layer asks for.
"""
