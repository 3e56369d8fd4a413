"""Kernel functions and blockwise kernel matrices (``kernel``) and Nyström bases: how basis
rows are chosen and their one feature map (``basis``; Pahikkala et al. 2009, §3.5). Imports
only ``_core``.
"""
from .basis import Basis as Basis
from .kernel import (Kernel as Kernel, gaussian_kernel as gaussian_kernel,
                     kernel_matrix as kernel_matrix, linear_kernel as linear_kernel,
                     polynomial_kernel as polynomial_kernel)
