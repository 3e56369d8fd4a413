"""Query and preference graphs as Laplacian operators (``graph``; Pahikkala et al. 2009,
§2.3-2.4), their constructors (``build``) and hold-out folds of whole queries (``folds``).
Imports ``_core`` and ``metrics`` (a graph scores its rows for early stopping).
"""
