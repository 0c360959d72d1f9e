"""What the gateway is told: upstreams, SLOs, limits, static labels, the secrets it holds, and which
of it may change while it runs. The
bottom of the gateway."""
