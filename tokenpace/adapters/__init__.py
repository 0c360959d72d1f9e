"""Adapters around the core: result files, the run store, reports, dataset readers, server-metrics
scraping, tokenizers, scenario files."""
