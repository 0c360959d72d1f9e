"""The wire, one for the client, the gateway and the simulator: HTTP/1.1 (both halves, in ``http1``),
endpoints and dialing, keep-alive and the resend rule, SSE and WebSocket framing, and the one list of
API dialects (``dialects``).

It sits above ``core`` (dialects fill a core ``RequestRecord``) and below everything else.
"""
