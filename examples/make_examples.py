"""Writes the sample inputs the README's commands use (run from the checkout: python examples/make_examples.py).

probs.npy / probs.csv  20 softmax vectors (10 classes) of a digits classifier (edgedp/data/digits_sample.npz)
logits.npy             the same rows as logits in [-20, 20] (query --range -20 20 -d 40)
images.npy             20 held-out digits images, (20, 64) float32 pixels in [0, 1]: model inputs (query --infer)
my_outputs.npz         64 rows of probs and their labels (tradeoff --data)
features.npz           300 digits records, features X (n, 64) and labels y (train --data, deploy --data)
"""
from pathlib import Path

import numpy as np

from edgedp.datasets import digits_split
from edgedp.cli.demo import bundled_sample

HERE = Path(__file__).resolve().parent

probs, labels = bundled_sample()
np.save(HERE / "probs.npy", probs[:20])
np.savetxt(HERE / "probs.csv", probs[:20], delimiter=",", fmt="%.6f")
np.save(HERE / "logits.npy", np.clip(np.log(probs[:20] + 1e-9), -20, 20))
np.savez(HERE / "my_outputs.npz", probs=probs, labels=labels)
s = digits_split(0)
np.save(HERE / "images.npy", s.X_test[:20].astype(np.float32))
np.savez(HERE / "features.npz", X=s.X_pool[:300].astype(np.float32), y=s.y_pool[:300])
