"""HTTP/1.1 on asyncio and httptools, both halves: ``server`` (the simulator and the scripted test
server) and ``client`` (the response kernel under the benchmark client and the gateway's upstream).

It imports nothing else from tokenpace.
"""
