"""TVM's ``tvm.transform.PassContext``: options for what runs inside a ``with`` block.

tiletune's lowering is a fixed list of passes, so most of TVM's pass options have nothing to act
on: ``opt_level``, ``required_pass``, ``disabled_pass`` and ``instruments`` are kept for code that
reads them back; ``config`` keys tiletune acts on are listed in :data:`CONFIG_KEYS`, any other key
warns that it has no effect.
"""
from __future__ import annotations

import warnings

#: config keys with an effect: te.keep_schedule_record records every schedule primitive
#: (``s.schedule_record``, ``s.primitive_record``) of schedules created inside the block
CONFIG_KEYS = {"te.keep_schedule_record": bool}

_STACK: list["PassContext"] = []


class PassContext:
    """``with tvm.transform.PassContext(opt_level=3, config={...}):`` (a context manager)."""

    def __init__(self, opt_level: int = 2, required_pass=None, disabled_pass=None, instruments=None,
                 config=None, **_tuning):
        for what, value in (("required_pass", required_pass), ("disabled_pass", disabled_pass),
                            ("instruments", instruments)):
            if value is not None and not isinstance(value, (list, tuple, set)):
                raise TypeError(f"PassContext: {what} is expected to be a list, tuple or set, got {value!r}")
        self.opt_level = int(opt_level)
        self.required_pass = list(required_pass or [])
        self.disabled_pass = list(disabled_pass or [])
        self.instruments = list(instruments or [])
        self.config = dict(config or {})
        for key in self.config:
            if key not in CONFIG_KEYS:
                warnings.warn(f"PassContext config {key!r} has no effect in tiletune (it acts on: "
                              f"{', '.join(sorted(CONFIG_KEYS))})", stacklevel=2)

    def __enter__(self) -> "PassContext":
        _STACK.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _STACK.remove(self)

    @staticmethod
    def current() -> "PassContext":
        """The innermost active context (a default one outside any ``with``)."""
        return _STACK[-1] if _STACK else _DEFAULT

    def get_config(self, key: str, default=None):
        return self.config.get(key, default)


_DEFAULT = PassContext()

__all__ = ["PassContext", "CONFIG_KEYS"]
