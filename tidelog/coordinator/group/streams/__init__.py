"""KIP-1071 streams groups (`group.protocol=streams`): Kafka's streams group coordinator (GroupMetadataManager's
streams part, StreamsGroup, StreamsGroupMember, the sticky task assignor and the internal topic manager)."""
