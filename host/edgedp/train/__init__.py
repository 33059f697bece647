"""Training with differential privacy: DP-SGD in JAX (``dpsgd``), its accounting
(``accountant``), the data it trains on (``data``), one run (``run``), and the audit of a
training configuration (``audit``, ``canary``)."""
