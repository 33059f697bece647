"""edgedp host tooling: talk to the DP output layer, replay it, measure it, evaluate it."""

__version__ = "0.1.0"
