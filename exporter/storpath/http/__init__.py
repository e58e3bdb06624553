"""Serving the exposition over HTTP: the cheroot server and its WSGI app (server), content
negotiation, the exporter-toolkit web config (TLS, basic auth), and the single flight that
shares one scrape between the requests that arrive while it runs (scrape)."""
