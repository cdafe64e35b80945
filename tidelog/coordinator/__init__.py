"""Coordinators (Kafka's group-coordinator and transaction-coordinator modules): each owns its internal
topic's records and state and is entered from thin request handlers in `tidelog.broker.apis`."""
