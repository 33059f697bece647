"""``edgedp dashboard``: a local, read-only web page over the fleet registry (docs/fleet.md,
"Dashboard"). ``queries`` reads the registry's tables, ``app`` serves the page, its JSON and the
charting library's script from the installed ``plotly`` package (no CDN)."""
