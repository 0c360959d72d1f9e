"""Capacity from a sweep: the knee, the plan (ceiling, watermark, replicas), a step as a load point,
Little's law, the SLO judged per step, drift with time. Pure; imports no other analysis room."""
