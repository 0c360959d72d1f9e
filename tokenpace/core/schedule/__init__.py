"""When to send: open-loop arrivals, ramp-up, and one run's schedule dealt to several processes. Pure
and seeded."""
