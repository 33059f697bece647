"""Issue 9.9: the teacher ensemble's partition is a data-independent function of the record id,
so adding or removing one record changes one teacher's training set and nothing else."""
from __future__ import annotations

import numpy as np

from edgedp.analysis import populations as models
from edgedp.datasets import digits_split


def parts(ids: np.ndarray, T: int, seed: int) -> dict[int, set[int]]:
    owner = models.teacher_of(ids, T, seed)
    return {j: set(ids[owner == j].tolist()) for j in range(T)}


def test_removing_one_record_changes_exactly_one_teacher() -> None:
    ids = digits_split(0).ids_pool
    T, seed = 30, 7
    full = parts(ids, T, seed)
    for r in ids[:: len(ids) // 25]:
        less = parts(ids[ids != r], T, seed)
        changed = [j for j in range(T) if full[j] != less[j]]
        assert len(changed) == 1
        j = changed[0]
        assert full[j] - less[j] == {int(r)}


def test_teacher_depends_on_id_only() -> None:
    ids = np.arange(500)
    a = models.teacher_of(ids, 10, 3)
    b = models.teacher_of(ids[::-1], 10, 3)[::-1]      # other order, other data set size
    assert np.array_equal(a, b)
    assert np.array_equal(models.teacher_of(ids[:100], 10, 3), a[:100])
    assert not np.array_equal(a, models.teacher_of(ids, 10, 4))   # the seed picks the hash
    counts = np.bincount(a, minlength=10)
    assert counts.min() > 25                                       # roughly balanced


def test_ensemble_votes_change_by_at_most_two_when_one_record_is_removed() -> None:
    s = digits_split(0)
    X, y, ids = s.X_pool[:300], s.y_pool[:300], s.ids_pool[:300]
    T, seed = 10, 1
    full = models.votes(models.train_teachers(X, y, T, seed, ids=ids), s.X_test, 10)
    keep = np.arange(300) != 17
    less = models.votes(models.train_teachers(X[keep], y[keep], T, seed, ids=ids[keep]), s.X_test, 10)
    assert np.abs(full - less).sum(axis=1).max() <= 2
