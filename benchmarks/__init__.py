"""kbroker benchmark harness: `python -m benchmarks --help`.

Modules: run.py (command line, phase orchestration, targets, table/JSON), broker.py (starting,
stopping and measuring a broker process), kwire.py (raw-socket ApiVersions/Metadata requests),
clients.py (confluent-kafka load generators), phases.py (one function per benchmark phase).
"""
