"""Experiments on live traffic: shadow copies to a candidate (mirror), business outcome events, the
per-client rate of events. Uses the rooms below it."""
