"""Example pipeline for the `tidelog` data source: updates -> compacted topic -> snapshot + streaming aggregates.

See docs/PIPELINE.md for how to run it against `make run`, and against Apache Kafka with Spark's own connector.
"""
