"""Starting, changing and stopping the gateway: one process on a TCP address, or N worker processes on
one port; live configuration changes (SIGHUP, POST /tokenpace/config) and the readiness probe of
the upstreams. The top of the gateway."""
