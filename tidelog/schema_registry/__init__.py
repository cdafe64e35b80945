"""The Schema Registry (issue 32): Confluent's REST API beside the broker, schemas kept on `_schemas`.

`schemas` is the schema library (parsing, canonical forms, compatibility) that the HTTP server calls.
"""
