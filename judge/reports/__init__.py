"""Reports: typed sections (the one contract between producers and renderers), the judge run's
metrics section, and the JSON/CSV/HTML writers with their plots."""
