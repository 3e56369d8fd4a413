"""Per-query ranking measures over segment ids (``pairs``: pairwise error, C-index, AUC,
Kendall τ_b; ``graded``: NDCG, MAP, P@k; Airola et al. 2010, §4; Pahikkala et al. 2009, §4)
and the choice of a grid point by a measure (``choice``). Imports only ``_core``.
"""
from .graded import (mean_average_precision as mean_average_precision, mrr as mrr,
                     ndcg as ndcg, precision_at_k as precision_at_k)
from .pairs import pairwise_error as pairwise_error
from .survival import harrell_c as harrell_c, uno_c as uno_c
