"""What the gateway is told: upstreams, SLOs, limits, static labels, and the secrets it holds. The
bottom of the gateway."""
