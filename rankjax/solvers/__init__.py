"""The solvers of RankRLS and what they share: the ridge core (one decomposition, every λ;
Pahikkala et al. 2009, §3.1-3.4), reduced dual systems, the exact hold-outs (§3.3-3.4), the
CG loop (Airola et al. 2010, §3) and the model types. Imports ``_core``, ``metrics``,
``graphs`` and ``kernels``.
"""
