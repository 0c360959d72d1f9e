"""Operating the gateway: its own pages (/metrics, /tokenpace/upstreams, liveness, readiness, the
running config and its changes) and the client-facing server's defences (slow, idle and too many
connections). Uses observability and the rooms below."""
