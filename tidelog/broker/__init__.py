"""The asyncio (uvloop) server: connections, request dispatch, one handler module per Kafka API."""
