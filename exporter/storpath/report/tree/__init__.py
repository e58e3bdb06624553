"""The storage topology as a tree: model (pure: facts and findings -> nodes), its
sources (a `storpath check` run, the exporter's last scrape) and the text renderer;
storpath.http.landing renders the same nodes as HTML."""
