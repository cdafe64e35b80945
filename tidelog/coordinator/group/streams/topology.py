"""A streams group's topology (Kafka's StreamsTopology) and its configuration against the topics that exist
(Kafka's InternalTopicManager.configureTopics): the number of tasks of each subtopology, the partition counts of
the repartition and changelog topics, the internal topics to create, and the status a member is told while the
topology cannot run (missing source topics, incorrectly partitioned topics, missing internal topics)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tidelog.protocol.errors import ErrorCode, KafkaError

# StreamsGroupHeartbeatResponse.Status codes (Kafka's StreamsGroupHeartbeatResponse.Status)
STALE_TOPOLOGY = 0
MISSING_SOURCE_TOPICS = 1
INCORRECTLY_PARTITIONED_TOPICS = 2
MISSING_INTERNAL_TOPICS = 3
SHUTDOWN_APPLICATION = 4
ASSIGNMENT_DELAYED = 5  # the group's initial rebalance delay is running (streams.initial.rebalance.delay.ms)
MISSING_CLIENT_TAGS = 6  # Kafka 4.4, heartbeat v1+ (KAFKA-20744)


@dataclass
class TopicInfo:
    name: str
    partitions: int = 0  # 0: decided by the coordinator
    replication_factor: int = 0
    configs: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "partitions": self.partitions, "rf": self.replication_factor,
                "configs": self.configs}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TopicInfo:
        return cls(str(d["name"]), int(d["partitions"]), int(d["rf"]), {str(k): str(v) for k, v in d["configs"].items()})


@dataclass
class Subtopology:
    subtopology_id: str
    source_topics: list[str] = field(default_factory=list)
    source_topic_regex: list[str] = field(default_factory=list)
    changelog_topics: list[TopicInfo] = field(default_factory=list)
    repartition_sink_topics: list[str] = field(default_factory=list)
    repartition_source_topics: list[TopicInfo] = field(default_factory=list)
    copartition_groups: list[list[str]] = field(default_factory=list)  # topic names

    def to_json(self) -> dict[str, Any]:
        return {"id": self.subtopology_id, "sources": self.source_topics, "regex": self.source_topic_regex,
                "changelogs": [t.to_json() for t in self.changelog_topics], "sinks": self.repartition_sink_topics,
                "repartition_sources": [t.to_json() for t in self.repartition_source_topics],
                "copartition": self.copartition_groups}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Subtopology:
        return cls(str(d["id"]), list(d["sources"]), list(d["regex"]),
                   [TopicInfo.from_json(t) for t in d["changelogs"]], list(d["sinks"]),
                   [TopicInfo.from_json(t) for t in d["repartition_sources"]], [list(g) for g in d["copartition"]])


@dataclass
class StreamsTopology:
    epoch: int
    subtopologies: dict[str, Subtopology]

    def to_json(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "subtopologies": [s.to_json() for s in self.subtopologies.values()]}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> StreamsTopology:
        subs = [Subtopology.from_json(s) for s in d["subtopologies"]]
        return cls(int(d["epoch"]), {s.subtopology_id: s for s in subs})

    @classmethod
    def from_request(cls, topology: Any) -> StreamsTopology:
        """StreamsTopology.fromHeartbeatRequest (the request was validated by the coordinator's validate())."""
        subs: dict[str, Subtopology] = {}
        for s in topology.subtopologies or []:
            sid = s.subtopology_id
            sources = list(s.source_topics or [])
            regex = list(s.source_topic_regex or [])
            repart = [_topic_info(t) for t in s.repartition_source_topics or []]
            changelogs = [_topic_info(t) for t in s.state_changelog_topics or []]
            groups: list[list[str]] = []
            for g in s.copartition_groups or []:
                try:
                    names = [sources[i] for i in g.source_topics or []] + \
                            [repart[i].name for i in g.repartition_source_topics or []]
                except IndexError:
                    raise _invalid(f"Copartition group of subtopology {sid} refers to an unknown topic.") from None
                groups.append(names)
            subs[sid] = Subtopology(sid, sources, regex, changelogs, list(s.repartition_sink_topics or []), repart,
                                    groups)
        return cls(int(topology.epoch), subs)


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.STREAMS_INVALID_TOPOLOGY, message)


def _topic_info(t: Any) -> TopicInfo:
    if t.partitions < 0:
        raise _invalid(f"Topic {t.name} has a negative partition count.")
    return TopicInfo(t.name, int(t.partitions), int(t.replication_factor),
                     {c.key: c.value for c in t.topic_configs or []})


@dataclass
class ConfiguredTopology:
    """What the topology is on the topics that exist: tasks per subtopology when it can run, else a status."""

    tasks: dict[str, int]  # subtopology id -> number of tasks (empty unless ready)
    status: tuple[int, str] | None  # (status code, detail) while the topology cannot run
    to_create: dict[str, TopicInfo]  # internal topics to create, with their partition counts decided
    partitions: dict[str, int]  # every topic of the topology that is resolved -> partition count

    @property
    def ready(self) -> bool:
        return self.status is None


def configure(topology: StreamsTopology, partitions_of: Callable[[str], int | None]) -> ConfiguredTopology:
    """InternalTopicManager.configureTopics: source topics must exist; repartition topics take their explicit
    count or the task count of the subtopology that writes them; copartitioned topics must agree; changelogs
    have one partition per task; internal topics that exist with another count are refused."""
    subs = topology.subtopologies
    missing = sorted({t for s in subs.values() for t in s.source_topics if partitions_of(t) is None})
    if missing:
        return ConfiguredTopology({}, (MISSING_SOURCE_TOPICS, f"Source topics {', '.join(missing)} are missing."),
                                  {}, {})
    counts: dict[str, int] = {t: int(partitions_of(t) or 0) for s in subs.values() for t in s.source_topics}
    writers: dict[str, list[str]] = {}
    for s in subs.values():
        for t in s.repartition_sink_topics:
            writers.setdefault(t, []).append(s.subtopology_id)
        for r in s.repartition_source_topics:
            if r.partitions > 0:
                counts[r.name] = r.partitions
    for _ in range(len(subs) + 1):  # fixed point: a repartition topic takes its writers' task count
        changed = False
        for s in subs.values():
            for r in s.repartition_source_topics:
                if r.name in counts:
                    continue
                known = [_tasks(subs[w], counts) for w in writers.get(r.name, [])]
                if known and all(k is not None for k in known):
                    counts[r.name] = max(k for k in known if k is not None)
                    changed = True
        if not changed:
            break
    for s in subs.values():  # copartition groups: repartition topics follow the sources; sources must agree
        for group in s.copartition_groups:
            internal = {r.name for r in s.repartition_source_topics if r.partitions == 0}
            fixed = {counts[t] for t in group if t not in internal and t in counts}
            if len(fixed) > 1:
                return ConfiguredTopology({}, (INCORRECTLY_PARTITIONED_TOPICS, f"Following topics do not have the "
                                               f"same number of partitions: [{', '.join(sorted(group))}]"), {}, {})
            if fixed:
                for t in group:
                    if t in internal:
                        counts[t] = next(iter(fixed))
    tasks: dict[str, int] = {}
    for s in subs.values():
        n = _tasks(s, counts)
        if n is None:
            return ConfiguredTopology({}, (MISSING_SOURCE_TOPICS, f"The number of partitions of the repartition "
                                           f"topics of subtopology {s.subtopology_id} cannot be decided."), {}, {})
        tasks[s.subtopology_id] = n
        for c in s.changelog_topics:
            counts[c.name] = n
    internal_infos = {t.name: t for s in subs.values() for t in (*s.repartition_source_topics, *s.changelog_topics)}
    changelogs = {t.name for s in subs.values() for t in s.changelog_topics}
    wrong, to_create = [], {}
    for name, info in sorted(internal_infos.items()):
        have = partitions_of(name)
        if have is None:
            configs = dict(info.configs)
            if name in changelogs:
                configs.setdefault("cleanup.policy", "compact")  # a changelog is compacted (Streams' default)
            to_create[name] = TopicInfo(name, counts[name], info.replication_factor, configs)
        elif have != counts[name]:
            wrong.append(name)
    if wrong:
        return ConfiguredTopology({}, (INCORRECTLY_PARTITIONED_TOPICS, "Following internal topics have an "
                                       f"incorrect number of partitions: {', '.join(wrong)}"), {}, counts)
    if to_create:
        return ConfiguredTopology({}, (MISSING_INTERNAL_TOPICS,
                                       f"Internal topics are missing: [{', '.join(sorted(to_create))}]"),
                                  to_create, counts)
    return ConfiguredTopology(tasks, None, {}, counts)


def _tasks(s: Subtopology, counts: dict[str, int]) -> int | None:
    names = [*s.source_topics, *(r.name for r in s.repartition_source_topics)]
    if any(n not in counts for n in names):
        return None
    return max((counts[n] for n in names), default=0)
