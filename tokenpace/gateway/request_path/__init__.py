"""A request's path through the gateway: intake within bounds, routing by model and weight, the pass-
through proxy, the model list, the Realtime WebSocket proxy. Uses every room below it."""
