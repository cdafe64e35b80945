"""KIP-848 consumer groups (`group.protocol=consumer`): Kafka's group coordinator's `modern.consumer` package."""
