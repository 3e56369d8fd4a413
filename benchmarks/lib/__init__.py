"""The benchmark suite's shared helpers, public to its scripts (each script puts
``benchmarks/`` on ``sys.path`` and imports ``lib.*``): the real sets (:mod:`lib.shared`),
timing and JSON lines (:mod:`lib.timing`), README blocks from committed lines
(:mod:`lib.blocks`), LightGBM/XGBoost beside rankjax (:mod:`lib.trees`), the precision
rule's measurement (:mod:`lib.precision`), a commit's package (:mod:`lib.commits`) and the
registry of every script (:mod:`lib.registry`)."""
