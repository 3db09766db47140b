"""The schema registry served by the broker: `_schemas` read and written through the broker's
replicas (service.py). The registry's rules are the pure kbroker.schema_registry package; its
HTTP listener is server/schema_registry_http.py."""
