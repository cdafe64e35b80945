"""The log cleaner: a pool of threads compacting the filthiest logs as Kafka does."""
