"""Reading a forwarded stream without changing it: token timestamps from a copy of the bytes, the per-
chunk relay, the body budget, first-token and stall timers, per-request gap stats, outcomes. Imports
no other gateway room."""
