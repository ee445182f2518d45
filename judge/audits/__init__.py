"""Audit suites from the bias literature: award choice (seed 000), name-based numeric advice
(seed 002) and the StereoSet/CrowS-Pairs Bias Balance Indicator (seed 004). Each suite is a
design (the prompts), a parser (the answer -> a label or a number, or missing with the raw
text) and an analysis (the statistics its design calls for, in ``judge/stats/tests.py``)."""
