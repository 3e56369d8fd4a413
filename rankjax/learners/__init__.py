"""The other learners of the papers: KPCRank (Tsivtsivadze et al. 2008), linear and kernel
L2 RankSVM (Kuo et al. 2014), pairwise Gaussian-process regression and RankBoost (Freund et
al. 2003). Imports ``_core``, ``graphs``, ``kernels``, ``metrics`` and ``solvers``.
"""
