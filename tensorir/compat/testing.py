"""``tvm.testing`` for ports: assertions, pytest parameters and fixtures, and GPU skip markers.

``parameter(1, 10)`` / ``parameters((16, "float32"), (512, "float16"))`` / ``@fixture`` define pytest
fixtures the way TVM's do (a module-level name becomes a fixture of that name); ``requires_gpu``,
``requires_cuda``, ``requires_tensorcore`` skip a test where the machine lacks the device (checked
through pycuda when the test runs), ``uses_gpu`` only marks it (it runs on the CPU too).
pytest is imported only by the helpers that need it.
"""
from __future__ import annotations

import copy
import functools
import inspect
import itertools
import sys

import numpy as np


def assert_allclose(actual, desired, rtol: float = 1e-7, atol: float = 1e-7) -> None:
    """``tvm.testing.assert_allclose``: numpy's, with TVM's default tolerances."""
    np.testing.assert_allclose(np.asarray(actual), np.asarray(desired), rtol=rtol, atol=atol, verbose=True)


def assert_prim_expr_equal(lhs, rhs) -> None:
    """``tvm.testing.assert_prim_expr_equal``: equal after simplifying their difference."""
    from ..arith import simplify
    from ..expr import IntImm, convert
    diff = simplify(convert(lhs) - convert(rhs))
    if not (isinstance(diff, IntImm) and diff.value == 0):
        raise ValueError(f"{lhs} and {rhs} are not equal (difference {diff})")


# -- parameters and fixtures ----------------------------------------------------------------------
def parameter(*values, ids=None, by_dict: dict | None = None):
    """A parametrized pytest fixture (``size = tvm.testing.parameter(1, 10, 100)``): a test taking
    ``size`` runs once per value; several parameters give every combination."""
    import pytest
    _provide_target_fixtures(sys._getframe(1).f_globals)
    if by_dict is not None:
        if values or ids:
            raise ValueError("tvm.testing.parameter: by_dict cannot be given with positional values or ids")
        ids, values = zip(*by_dict.items())

    @pytest.fixture(params=values, ids=ids, scope="session")
    def as_fixture(*_cls, request):
        return request.param
    return as_fixture


_group = itertools.count()


def parameters(*value_sets, ids=None) -> list:
    """Fixtures that vary together (``size, dtype = tvm.testing.parameters((16, "float32"), ...)``):
    a test taking them runs once per set, not per combination.  The sets are one hidden parametrized
    fixture of the calling module, which each returned fixture reads its element of."""
    import pytest
    hidden = f"_tvm_parameters_{next(_group)}"
    _provide_target_fixtures(sys._getframe(1).f_globals)
    sys._getframe(1).f_globals[hidden] = pytest.fixture(
        params=[tuple(v) for v in value_sets], ids=ids, scope="session")(lambda *_cls, request: request.param)
    width = len(value_sets[0]) if value_sets else 0

    def element(k: int):
        def get(*_cls, **kwargs):
            return kwargs[hidden][k]
        get.__signature__ = inspect.Signature([inspect.Parameter(hidden, inspect.Parameter.KEYWORD_ONLY)])
        return pytest.fixture(get)
    return [element(k) for k in range(width)]


def fixture(func=None, *, cache_return_value: bool = False):
    """``@tvm.testing.fixture``: a pytest fixture; with ``cache_return_value=True`` its value is
    computed once per distinct argument values and each test gets a deep copy."""
    import pytest
    _provide_target_fixtures(sys._getframe(1).f_globals)

    def wrap(fn):
        return pytest.fixture(_cached(fn) if cache_return_value else fn)
    return wrap if func is None else wrap(func)


def _provide_target_fixtures(module: dict) -> None:
    """TVM's pytest plugin gives every test module ``target`` (each enabled target) and ``dev`` (its
    device) fixtures; a module using these helpers gets them too, unless it defines its own."""
    import pytest
    from ..ndarray import device
    if "target" not in module:
        module["target"] = pytest.fixture(params=[t for t, _ in enabled_targets()], scope="session")(
            lambda *_cls, request: request.param)
    if "dev" not in module:
        module["dev"] = pytest.fixture(lambda *_cls, target: device(target))


def _cached(fn):
    cache: dict = {}

    @functools.wraps(fn)
    def inner(*args, **kwargs):
        try:
            key = repr((args, sorted(kwargs.items())))
        except Exception:  # noqa: BLE001 - an argument without a usable repr: no caching
            return fn(*args, **kwargs)
        if key not in cache:
            cache[key] = fn(*args, **kwargs)
        return copy.deepcopy(cache[key])
    return inner


# -- device features ------------------------------------------------------------------------------
def _cuda_capability() -> tuple[int, int] | None:
    """The compute capability of GPU 0 (through pycuda), or None without one."""
    try:
        import pycuda.driver as drv
        drv.init()
        return drv.Device(0).compute_capability() if drv.Device.count() else None
    except Exception:  # noqa: BLE001 - no pycuda, no driver, no GPU
        return None


class Feature:
    """A skip marker (``@tvm.testing.requires_cuda``, ``requires_cuda.marks()``) for a device feature;
    ``optional`` ones (``uses_gpu``) only mark the test."""

    def __init__(self, name: str, check=None, optional: bool = False):
        self.name, self.check, self.optional = name, check, optional

    def marks(self, support_required: str = "compile-and-run") -> list:
        import pytest
        if self.optional or support_required == "optional" or self.check is None:
            return []
        return [pytest.mark.skipif(not self.check(), reason=f"needs {self.name}")]

    def __call__(self, func=None, *, support_required: str = "compile-and-run"):
        if func is None:  # requires_gpu(support_required="optional")
            return Feature(self.name, self.check, self.optional or support_required == "optional")
        for mark in self.marks(support_required):
            func = mark(func)
        return func


def _has_cuda() -> bool:
    return _cuda_capability() is not None


def _has_tensorcore() -> bool:
    cc = _cuda_capability()
    return cc is not None and cc >= (7, 0)


requires_llvm = Feature("llvm", lambda: True)
requires_gpu = Feature("gpu", _has_cuda)
requires_cuda = Feature("cuda", _has_cuda)
requires_tensorcore = Feature("tensorcore", _has_tensorcore)
uses_gpu = Feature("gpu", _has_cuda, optional=True)


def device_enabled(target) -> bool:
    """Whether a target's device is here: ``llvm`` always, ``cuda`` with a GPU."""
    kind = str(target).split()[0]
    return kind in ("llvm", "c") or (kind in ("cuda", "nvptx") and _has_cuda())


def enabled_targets() -> list:
    """``(target, device)`` pairs that can run here (TVM's default: llvm, and cuda with a GPU)."""
    from ..ndarray import device
    return [(t, device(t)) for t in ("llvm", "cuda") if device_enabled(t)]


def parametrize_targets(*args):
    """``@tvm.testing.parametrize_targets("llvm", "cuda")`` (bare: both): the test runs once per target,
    taking ``target`` and/or ``dev`` (its device); targets not here are skipped."""
    if len(args) == 1 and callable(args[0]):
        return parametrize_targets("llvm", "cuda")(args[0])

    def wrap(func):
        import pytest
        from ..ndarray import device
        names = [n for n in ("target", "dev") if n in inspect.signature(func).parameters]
        if not names:
            raise TypeError(f"parametrize_targets: {func.__name__} takes neither 'target' nor 'dev'")
        cases = [pytest.param(*[{"target": t, "dev": device(t)}[n] for n in names], id=str(t),
                              marks=[] if device_enabled(t) else [pytest.mark.skip(reason=f"{t} is not enabled")])
                 for t in args]
        return pytest.mark.parametrize(",".join(names), cases)(func)
    return wrap


def main() -> None:
    """``tvm.testing.main()`` at the end of a test file: run it with pytest."""
    import pytest
    sys.exit(pytest.main([sys.argv[0]] + sys.argv[1:]))


__all__ = ["assert_allclose", "assert_prim_expr_equal", "parameter", "parameters", "fixture", "Feature",
           "requires_llvm", "requires_gpu", "requires_cuda", "requires_tensorcore", "uses_gpu",
           "device_enabled", "enabled_targets", "parametrize_targets", "main"]
