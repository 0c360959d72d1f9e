"""`tokenpace sim`: serve the simulated engine, run it in virtual time, calibrate and validate it; and
their views."""
