"""The core every other folder stands on: the precision rule and host checks
(``checks``, ``resolved``), compiled cores (``cores``: ``jax.jit`` with the seat
:mod:`rankjax.runtime` serves), logging (``log``), the backend's code paths (``backend``,
``emulate``), memory plans
(``memory``), array kinds (``sparse``), segment sums (``segments``), dense linear algebra
(``linalg``, ``lapack``, ``products``) and the registry of model types (``types``). It imports nothing of
rankjax outside this folder.
"""
