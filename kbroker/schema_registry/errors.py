"""Errors of the schema registry's pure parts."""


class InvalidSchema(ValueError):
    """The schema text cannot be parsed or is not valid for its type (Confluent's 42201)."""
