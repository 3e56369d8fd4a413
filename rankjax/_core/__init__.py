"""The core every other folder stands on: the precision rule and host checks
(``checks``, ``resolved``), kept programs and the disk cache (``programs``, ``cache``),
logging (``log``), the backend's code paths (``backend``, ``xla``, ``emulate``), memory plans
(``memory``), array kinds (``sparse``), segment sums (``segments``), dense linear algebra
(``linalg``, ``products``) and the registry of model types (``types``). It imports nothing of
rankjax outside this folder.
"""
