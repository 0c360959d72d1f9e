"""`tokenpace select` and `tokenpace scenarios`: candidates judged against a scenario's lines."""
