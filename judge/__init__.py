"""FairJudge's domain core: datasets, model calls, rubric judging, metrics and reports.

Nothing in this package imports Flask or ``server``; the CLI and the web layer call into it.
"""
