"""Starting and stopping the gateway: one process on a TCP address, or N worker processes on one port.
The top of the gateway."""
