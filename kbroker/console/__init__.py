"""`kbroker console`: a web console for any Kafka-protocol cluster (kbroker or Apache Kafka).

It is a separate process that speaks only the Kafka protocol, through `kbroker.admin` (import-linter
keeps broker internals out). `browse.py` and `pages.py` are the pure core (what a query means, how
a record is shown, the rows of each page); `backend.py` asks the brokers (blocking, run in worker
threads); `app.py` is the Starlette application (routes, Jinja templates, htmx fragments for live
refresh); `command.py` the `kbroker console` subcommand.
"""
