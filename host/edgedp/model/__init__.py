"""Models on the device: the deployable description, its bit-exact NumPy inference, converters
from scikit-learn / `edgedp train` files, and the C data generator (docs/model.md)."""
