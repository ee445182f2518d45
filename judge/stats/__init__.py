"""Agreement statistics: pure numpy/scipy/scikit-learn/krippendorff, no database, no domain types.

``coefficient`` (Coefficient, UndefinedWarning, BootstrapOptions), ``matrix`` (RatingMatrix:
raters x items, missing allowed), ``pairs`` (judge vs human on paired scores), ``raters``
(agreement among raters), ``levels`` (grouped, system level, self-consistency, items needed)
and ``bootstrap`` (the vectorised item bootstrap). Imports no other project module.
"""
