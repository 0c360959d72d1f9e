"""Selection: scenarios and their lines, a candidate placed at a scenario's load and judged, cost and
recommendation, predicted candidates, the prefill fit. Pure; uses capacity."""
