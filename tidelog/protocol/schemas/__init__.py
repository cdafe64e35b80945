"""Kafka message schemas (JSON, Kafka's message-definition format) for APIs kafka-python 3.0.12 lacks; loaded
by `tidelog.protocol.kip848`, `tidelog.protocol.telemetry` and `tidelog.protocol.share` through kafka-python's
schema-driven codec."""
