"""Reports: tables, HTML (plotly, JS inline, offline), Markdown and CSV of runs and sweeps."""
