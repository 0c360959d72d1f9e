"""A request's record: opened, ended once with its outcome, sent through a bounded queue to the records
file and the run store. Uses observability and the rooms below."""
