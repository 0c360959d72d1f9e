"""What one run is: its config and result types, the context a load shape sends through, the conditions
it ran under, its outputs and exit status, the one event loop, and the workload it sends. Uses
app.watch and the layers below the app."""
