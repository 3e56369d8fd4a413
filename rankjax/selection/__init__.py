"""Choosing hyper-parameters: a grid of solvers × λ scored by exact hold-out (``select``),
gradient descent on the exact hold-out loss (``tune``) and permutation tests (``cv``;
Pahikkala et al. 2009, §3.3, §4.1). Imports ``solvers`` and everything below it.
"""
