"""Einsum lowered to transpose / reshape / batch_matmul / sum, compiled natively against onnxruntime;
equations it cannot lower (broadcasting between operands) run by reference."""
import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx_op_check import check, node_model

from tensorir import graph

rng = np.random.default_rng()

CASES = [("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("bhid,bhjd->bhij", [(2, 3, 4, 5), (2, 3, 6, 5)]),
         ("bhij,bhjd->bhid", [(2, 3, 4, 6), (2, 3, 6, 5)]), ("ij->ji", [(3, 4)]), ("ij->", [(3, 4)]),
         ("i,i->", [(7,), (7,)]), ("i,j->ij", [(3,), (4,)]), ("...ij,...jk->...ik", [(2, 3, 4, 5), (2, 3, 5, 6)]),
         ("abc,cd->abd", [(2, 3, 4), (4, 5)]), ("ii->i", [(5, 5)]), ("bii->bi", [(2, 4, 4)]),
         ("ij,jk", [(3, 4), (4, 5)]),
         ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]), ("nchw,oc->nohw", [(2, 3, 4, 5), (6, 3)]),
         ("ijk->kj", [(3, 4, 5)]), ("i i , i j -> j", [(3, 3), (3, 4)]), ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)])]


@pytest.mark.parametrize("equation,shapes", CASES, ids=[c[0].replace(" ", "") for c in CASES])
def test_einsum(equation, shapes):
    feed = {f"x{k}": rng.standard_normal(s).astype("float32") for k, s in enumerate(shapes)}
    check(node_model("Einsum", feed, {"equation": equation}), feed, rtol=1e-5, atol=1e-5)


def test_broadcasting_operands_fall_back_by_name():
    feed = {"a": rng.standard_normal((1, 3, 4)).astype("float32"),
            "b": rng.standard_normal((5, 4, 2)).astype("float32")}
    g, _ = graph.from_onnx(node_model("Einsum", feed, {"equation": "bij,bjk->bik"}))
    assert graph.unsupported_ops(g) == {"Einsum": 1}
