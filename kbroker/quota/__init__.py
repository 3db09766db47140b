"""Client quotas and connection limits: the pure core (no trio, no sockets, no handlers).

`entities.py` is Kafka's quota entities, keys and precedence; `stats.py` its sampled rate and token
bucket with the throttle times Kafka derives from them; `manager.py` the four client quota managers
(produce and fetch byte rates, request time, controller mutations) fed from the stored configs;
`connections.py` the connection limits (max.connections, per listener, per IP). The request path
uses them in kbroker/api/throttling.py, the server in kbroker/server/server.py.
"""
