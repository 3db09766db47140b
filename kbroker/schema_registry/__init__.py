"""The schema registry (Confluent's REST API, issue 25): pure parts — schema types, compatibility, the _schemas records."""
