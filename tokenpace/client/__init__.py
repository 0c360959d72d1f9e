"""The measuring client: send a prepared request on the wire and turn its answer into a record."""

from tokenpace.client.sender import Sender

__all__ = ["Sender"]
