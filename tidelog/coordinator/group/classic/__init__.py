"""Classic groups (`group.protocol=classic`): Kafka's group coordinator's `classic` package."""
