"""A sweep: one full run per load step, the steps lengthened when short, and the capacity read from
them. Uses app.workers, app.bench, app.run."""
