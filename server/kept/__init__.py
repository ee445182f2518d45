"""Figures kept between requests and served within a bound: the one path the API's report,
agreement and diagnostics and the dashboard's pages share (``serving``), over a cache of
figures in each process's memory (``cache``). Neither the API nor the dashboard owns it, so
both import it without importing each other."""
