"""Privacy analysis on the host: what a setting costs (accounting) and what it buys.

One concern per module: ``accounting`` (composition, budget planning, hypothesis-test bounds),
``data`` (digits, user .npz), ``models`` (target, shadow and teacher training), ``mechanism``
(the released view of each output mode, through ``edgedp.mech.fast``), ``tradeoff``, ``mia``
(membership inference, averaging), ``extraction``, ``device_check`` (tradeoff --target),
``plots``, ``report``; ``settings``, ``parallel`` and ``jsonable`` are shared plumbing.
Commands live in ``edgedp.cli.analysis``.
"""
