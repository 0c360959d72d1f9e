"""Gray releases and A/B: per-arm rates and latency, guard rails, the sample-ratio check, paired A/B
blocks. Pure; uses comparison and evidence."""
