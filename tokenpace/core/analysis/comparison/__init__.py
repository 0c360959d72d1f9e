"""Two sides of stored runs compared metric by metric, live against shadow on the same requests, the
release gate, a metric's history, which conditions differ. Pure; uses evidence."""
