"""``GridSearchTuner``: configs in index order (the first knob varying fastest), or the given ones."""
from __future__ import annotations

from collections.abc import Sequence

from .tuner import Tuner


class GridSearchTuner(Tuner):
    """Walks the whole space in index order; ``indices``: only those configs, in that order (a sweep of
    chosen configs, e.g. the best records of a log with a knob changed; the template's default is then
    not added unless asked for with ``include_default=True``)."""

    def __init__(self, task, indices: Sequence[int] | None = None, **kwargs):
        kwargs.setdefault("include_default", indices is None)
        super().__init__(task, **kwargs)
        self._order = None if indices is None else [int(i) for i in indices]
        if self._order is not None:
            bad = [i for i in self._order if not self.space.is_index_valid(i)]
            if bad:
                raise ValueError(f"GridSearchTuner: config indices {bad[:5]} are outside {self.task!r}'s space "
                                 f"of {len(self.space)}")
        self._next = 0

    def next_batch(self, batch_size: int) -> list[int]:
        end = len(self.space) if self._order is None else len(self._order)
        out = []
        while len(out) < batch_size and self._next < end:
            i = self.space.valid_index(self._next) if self._order is None else self._order[self._next]
            if i not in self.visited and i not in out:
                out.append(i)
            self._next += 1
        return out

    def has_next(self) -> bool:
        end = len(self.space) if self._order is None else len(self._order)
        return self._next < end


__all__ = ["GridSearchTuner"]
