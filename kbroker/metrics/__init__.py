"""Prometheus metrics (`metrics.listener`): the broker's counters (`stats.py`, bumped on the hot
path) and the collector that reads them and the broker's state at scrape time (`collector.py`).
Pure: no sockets, no trio; the HTTP endpoint is `kbroker/server/metrics_http.py`."""
