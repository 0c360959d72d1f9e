"""What the proxy sends and answers around a body: the upstream request head, its own error responses,
header values as sent. Uses gateway.config and gateway.metering."""
