"""`pgq dashboard`: a web UI of the queue (Starlette, Jinja2, htmx, uPlot)."""
