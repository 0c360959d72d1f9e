"""Gray releases and A/B: per-arm rates and latency, guard rails, the sample-ratio check, the ladder
of steps and the move a verdict asks for, paired A/B blocks. Pure; uses comparison and evidence."""
