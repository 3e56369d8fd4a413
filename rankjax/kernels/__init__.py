"""Kernel functions and blockwise kernel matrices (``kernel``) and Nyström bases: how basis
rows are chosen and their one feature map (``basis``; Pahikkala et al. 2009, §3.5). Imports
only ``_core``.
"""
