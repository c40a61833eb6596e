"""The scheduler's host time a round: what Python does between kernels, cut.

- commit: the KDA ReplaySSM commit fed the step indices the verify already prepared (the
  `prepared_commit` lever);
- gc_freeze: the garbage collector frozen once the engine is up (the `gc_freeze` lever);
- cores: the scheduler on the fastest cores, where the CPU's cores differ in speed (the
  `fast_cores` lever);
- log_level: the log level ling-chat asks SGLang for, in force once the scheduler is up (every
  engine's, not a lever: patches/__init__.py installs it).

Each lever's patch records what it did in this process; its module under app/levers/host reads
that through `Sources.patch` and judges it.
"""
