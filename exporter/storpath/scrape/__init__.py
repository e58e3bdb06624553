"""A scrape's reading: the sources read once per scrape into one Snapshot (snapshot), the slow
sources declared once and read by one runner (slow, probes), metric families and their rows
(families) and the text formats (exposition)."""
