"""``retrieve.positions.Positions``: the rowid -> position map of the in-process indexes behaves as
the dict it replaces, whatever the base (sorted or not, with or without explicit positions) and
whatever the writes since (replace, remove, remove and add again)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from hybridmem.retrieve.positions import Positions


@pytest.mark.parametrize("seed", range(40))
def test_positions_behave_as_a_dict(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.choice([0, 1, 2, 50, 500])
    rowids = rng.sample(range(1, 5 * n + 10), n)
    if rng.random() < 0.5:
        rowids.sort()
    explicit = rng.random() < 0.5
    where = rng.sample(range(10 * n + 10), n) if explicit else list(range(n))
    pos = Positions(np.asarray(rowids, np.int64), np.asarray(where, np.int64) if explicit else None)
    model = dict(zip(rowids, where))
    nxt = 10 * n + 10
    universe = range(0, 5 * n + 20)
    for _ in range(300):
        op = rng.random()
        r = rng.choice(universe)
        if op < 0.3:
            pos[r] = model[r] = nxt
            nxt += 1
        elif op < 0.55:
            assert pos.pop(r) == model.pop(r, None)
        elif op < 0.65:
            fresh = [x for x in rng.sample(universe, 5) if x not in model]
            assert not pos.holds_any(fresh)
            pos.add_new(fresh, nxt)
            model.update(zip(fresh, range(nxt, nxt + len(fresh))))
            nxt += len(fresh)
        else:
            assert pos.get(r) == model.get(r) and (r in pos) == (r in model)
        assert len(pos) == len(model)
    probe = rng.sample(universe, min(30, len(universe)))
    assert pos.positions(np.asarray(probe, np.int64)).tolist() == [model.get(r, -1) for r in probe]
    assert pos.holds_any(probe) == any(r in model for r in probe)
    assert pos.as_dict() == model and pos == model


def test_a_base_is_not_copied_nor_sorted_until_a_lookup_needs_it() -> None:
    keys = np.array([9, 3, 7], np.int64)
    pos = Positions(keys)
    assert pos._index is None and len(pos) == 3  # opening costs nothing
    assert pos.get(7) == 2 and pos.get(4) is None
    assert pos._index is not None and pos._index[0].tolist() == [3, 7, 9]
    ordered = np.arange(1, 1001, dtype=np.int64)
    p2 = Positions(ordered)
    assert p2.get(500) == 499 and p2._index is not None and p2._index[0] is ordered  # sorted: used as it is
