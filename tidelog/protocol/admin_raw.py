"""Requests kafka-python 3.0.12's admin client has no API for, sent over that client's own connection with
tidelog's codecs (kip848.py, share.py) or kafka-python's message classes: ConsumerGroupDescribe (KIP-848),
ShareGroupDescribe (KIP-932) and DescribeClientQuotas. Shared by `tidelog group` and the web console."""

from __future__ import annotations

from typing import Any

import kafka.errors as errors
from kafka.protocol.admin.client_quotas import DescribeClientQuotasRequest

from tidelog.protocol.kip848 import ConsumerGroupDescribeRequest
from tidelog.protocol.share import ShareGroupDescribeRequest


class AdminRequestError(Exception):
    """An error code in an answer (for a group: one other than GROUP_ID_NOT_FOUND)."""

    def __init__(self, error: str, message: str | None) -> None:
        super().__init__(f"{error}{': ' + message if message else ''}")
        self.error = error
        self.message = message


def error_name(code: int) -> str:
    """Kafka's name of an error code ("NONE" for 0), e.g. GROUP_ID_NOT_FOUND."""
    if code == 0:
        return "NONE"
    return str(errors.for_code(code).message or f"UNKNOWN_ERROR_{code}")


def send(admin: Any, request: Any, node_id: int | None = None) -> Any | None:
    """`request` over the admin client's connection manager to `node_id` (None: the least loaded node); None
    when the broker lacks the API."""
    manager = admin._manager  # noqa: SLF001 - kafka-python's connection manager sends any ApiMessage
    try:
        return manager.run(manager.send, request, node_id)
    except (errors.IncompatibleBrokerVersion, errors.UnsupportedVersionError):
        return None


def send_to_coordinator(admin: Any, group_id: str, request: Any) -> Any | None:
    """`request` to the group's coordinator (FindCoordinator through the admin client); None: API missing."""
    coordinator = admin._manager.run(admin._find_coordinator_id, group_id)  # noqa: SLF001
    return send(admin, request, coordinator)


def describe_modern_group(admin: Any, group_id: str) -> tuple[str, dict[str, Any], list[dict[str, Any]]] | None:
    """(type, info, members) from ConsumerGroupDescribe, else ShareGroupDescribe (the Java admin's
    DescribeConsumerGroupsHandler falls back between DescribeGroups and ConsumerGroupDescribe the same way);
    None if neither knows the group. Raises AdminRequestError on any other group error."""
    for kind, request in (("consumer", ConsumerGroupDescribeRequest), ("share", ShareGroupDescribeRequest)):
        response = send_to_coordinator(admin, group_id,
                                       request(group_ids=[group_id], include_authorized_operations=False))
        if response is None:
            continue
        group = response.groups[0]
        if error_name(group.error_code) == "GROUP_ID_NOT_FOUND":
            continue
        if group.error_code:
            raise AdminRequestError(error_name(group.error_code), group.error_message)
        members = [{"member_id": m.member_id, "group_instance_id": getattr(m, "instance_id", None),
                    "client_id": m.client_id, "host": m.client_host, "member_epoch": m.member_epoch,
                    "assignments": [{"topic": t.topic_name, "partitions": sorted(t.partitions)}
                                    for t in m.assignment.topic_partitions]} for m in group.members]
        return kind, {"group_state": group.group_state, "protocol_type": kind,
                      "assignor_name": group.assignor_name}, members
    return None


def describe_client_quotas(admin: Any) -> list[dict[str, Any]]:
    """Every quota entity and its values: DescribeClientQuotas with no components (match all) and strict=false,
    as `kafka-configs --describe --entity-type users/clients/ips` without names (Kafka's
    ClientQuotaFilter.all()). Entity names None stand for the default entity."""
    response = send(admin, DescribeClientQuotasRequest(components=[], strict=False))
    if response is None:
        raise AdminRequestError("UNSUPPORTED_VERSION", "the broker has no DescribeClientQuotas")
    if response.error_code:
        raise AdminRequestError(error_name(response.error_code), response.error_message)
    return [{"entity": {e.entity_type: e.entity_name for e in entry.entity},
             "values": {v.key: v.value for v in entry.values}} for entry in response.entries or []]
