"""The durable event log: streams with gapless sequence numbers, and the live feeds (WebSocket,
SSE, the channel layer) that replay from it and follow it."""
