"""Checks on the judge itself: counterfactual copies of judged answers, judging in both
orders, length and self-preference, and the "judge diagnostics" report section (issue 14)."""
