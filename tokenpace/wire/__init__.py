"""The wire, one for the client, the gateway and the simulator: HTTP/1.1 (both halves, in ``http1``),
endpoints and dialing, the one request-head builder (``request``), the one ``Exchange``
(``exchange``), the one keep-alive pool and resend rule (``pool``), bounded decompression
(``inflate``), SSE and WebSocket framing, and the one list of API dialects (``dialects``).

It sits above ``core`` (dialects fill a core ``RequestRecord``) and below everything else.
"""
