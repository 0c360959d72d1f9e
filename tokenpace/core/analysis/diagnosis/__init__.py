"""Where a request's time went: hops from traces, the tail's hops, the engine's own metrics and the
TTFT decomposition, silences (server stalls), the client's own stalls and the requests they held. Pure."""
