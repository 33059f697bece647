"""``edgedp dashboard``: a local, read-only web page over the fleet registry (docs/fleet.md,
"Dashboard"). ``views`` gathers the series from the registry's read API (edgedp.fleet.status),
``app`` serves the page (``page``), its JSON and the charting library's script from the installed
``plotly`` package (no CDN)."""
