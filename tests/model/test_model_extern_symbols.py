"""The model build refuses code that calls a function nobody defines (MCJIT would bind it to 0)."""
from __future__ import annotations

import pytest

from codegen.llvm import CodegenError
from codegen.model.entries import link_model
from codegen.target import Target

ENTRIES = "define void @tt_entry() {\n  ret void\n}\n"


def _kernel(callee: str) -> str:
    return (f"declare float @{callee}(float)\n"
            f"define float @tt_kernel(float %x) {{\n  %y = call float @{callee}(float %x)\n  ret float %y\n}}\n")


def test_undefined_extern_is_named():
    with pytest.raises(CodegenError, match="tiletune_no_such_fn"):
        link_model(ENTRIES, [_kernel("tiletune_no_such_fn")], Target("llvm"))


def test_process_and_intrinsic_functions_link():
    link_model(ENTRIES, [_kernel("expf")], Target("llvm"))
    link_model(ENTRIES, [_kernel("llvm.exp.f32")], Target("llvm"))
