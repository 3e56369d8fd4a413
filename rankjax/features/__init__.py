"""Feature maps learned on the training rows and carried in the model (``maps``: the
:class:`FeatureMap` type and its application; ``learn``: learning one): the rank map of the
kernel estimators' default, robust to any monotone map of a column, and the standardisation of
the linear ones; missing values and categories as LightGBM users have them. Imports only
``_core``.
"""
from .learn import learn_feature_map as learn_feature_map
from .maps import FeatureMap as FeatureMap

__all__ = ["FeatureMap", "learn_feature_map"]
