"""Kafka wire protocol: framing, headers, request/response codecs (kafka-python's schema-driven
messages, loaded lazily) and error codes."""
