"""The pure core: the request record, metrics, statistics, what to send (workload) and when (schedule),
and the analyses (core/analysis). No I/O, no clock."""
