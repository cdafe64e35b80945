"""Loading[T]: a subsystem the broker loads after it is ready.

Kafka serves Metadata, Produce and Fetch while its group and transaction coordinators are still loading their
partitions; until then their APIs answer COORDINATOR_LOAD_IN_PROGRESS and clients retry (Kafka's
CoordinatorRuntime / TransactionStateManager "loading" states). `get()` raises exactly that while loading.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from tidelog.protocol.errors import ErrorCode, KafkaError

T = TypeVar("T")


class Loading(Generic[T]):
    def __init__(self, name: str) -> None:
        self.name = name
        self._value: T | None = None

    @property
    def loaded(self) -> bool:
        return self._value is not None

    def set(self, value: T) -> None:
        self._value = value

    def get(self) -> T:
        """The loaded value; KafkaError(COORDINATOR_LOAD_IN_PROGRESS) until it is set."""
        if self._value is None:
            raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, f"the {self.name} is loading")
        return self._value

    def get_or_none(self) -> T | None:
        """For shutdown, which stops whatever was loaded."""
        return self._value
