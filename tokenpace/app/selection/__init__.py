"""Selection: stored and predicted candidates judged against a scenario, costed, and the cheapest that
passes."""
