"""The `tokenpace` command: one room per command group, each parsing options into a config, calling the
app once and rendering what comes back."""
