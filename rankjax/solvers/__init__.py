"""The solvers of RankRLS and what they share: the ridge core (one decomposition, every λ;
Pahikkala et al. 2009, §3.1-3.4), reduced dual systems, the exact hold-outs (§3.3-3.4), the
CG loop (Airola et al. 2010, §3) and the model types. Imports ``_core``, ``metrics``,
``graphs`` and ``kernels``.
"""
from .auto import Auto as Auto
from .base import (AbstractSolver as AbstractSolver, METHODS as METHODS,
                   capabilities as capabilities, kinds_of as kinds_of, solver as solver,
                   takes as takes)
from .cg import CG as CG
from .dual import Dual as Dual
from .falkon import Falkon as Falkon
from .holdout import HoldOut as HoldOut
from .lpo import LeavePairOut as LeavePairOut
from .models import (PrimalPath as PrimalPath, DualModel as DualModel, KernelModel as KernelModel,
                     LinearModel as LinearModel, NystromModel as NystromModel,
                     ScaledModel as ScaledModel, MappedModel as MappedModel,
                     BlendModel as BlendModel, is_linear as is_linear,
                     predict as predict)
from .nystrom import Nystrom as Nystrom
from .primal import Primal as Primal
from ..kernels.basis import Basis as Basis
from .._solution import lane_codes as lane_codes
from .._core.types import saveable as saveable
from .state import State as State

# the extension API (docs: "Writing a solver"): what a solver of one's own is built from
__all__ = ["METHODS", "solver", "takes", "kinds_of", "State", "lane_codes", "saveable",
           "HoldOut", "PrimalPath"]
