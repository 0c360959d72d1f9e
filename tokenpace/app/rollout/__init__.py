"""A against B: the drift-controlled A/B run, a gateway's arms judged as a gray release (and its
step made on the running gateway), and live against shadow copies. Uses app.workers, app.bench, app.run."""
