"""Broker and topic configuration with Kafka's names, defaults, synonyms and validation."""
