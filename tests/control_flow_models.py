"""Small ONNX models with control flow, built with onnx.helper for the graph and model tests: If on a
data-dependent condition with a nested If and branches that read outer values, Loop (carried values,
scan outputs, a condition that stops early, a trip count input), Scan (forward and reverse, axes), and
an If whose one branch cannot run at the bound shapes.  ``feeds(model, rng)`` draws fresh inputs."""
from __future__ import annotations

import numpy as np


def _vi(name, elem, shape):
    from onnx import helper
    return helper.make_tensor_value_info(name, elem, shape)


def _model(nodes, inputs, outputs, inits=(), opset=17):
    import onnx
    from onnx import helper
    m = helper.make_model(helper.make_graph(nodes, "m", inputs, outputs, list(inits)),
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def if_nested():
    """``If(sum(x) > 0)``: then = relu(inner) + w with ``inner = If(max(y) < 0, x * y, x - y)``, also returned;
    else = (tanh x, -tanh x).  Outputs: first result + second result, and the second result."""
    from onnx import TensorProto as T, helper as h, numpy_helper
    f, s = T.FLOAT, [2, 3]
    inner_then = h.make_graph([h.make_node("Mul", ["x", "y"], ["r"])], "inner_then", [], [_vi("r", f, s)])
    inner_else = h.make_graph([h.make_node("Sub", ["x", "y"], ["r2"])], "inner_else", [], [_vi("r2", f, s)])
    then = h.make_graph([h.make_node("ReduceMax", ["y"], ["ym"], keepdims=0),
                         h.make_node("Less", ["ym", "zero"], ["c2"]),
                         h.make_node("If", ["c2"], ["t1"], name="inner_if", then_branch=inner_then,
                                     else_branch=inner_else),
                         h.make_node("Relu", ["t1"], ["t2"]), h.make_node("Add", ["t2", "w"], ["t3"])],
                        "then", [], [_vi("t3", f, s), _vi("t1", f, s)])
    orelse = h.make_graph([h.make_node("Tanh", ["x"], ["e1"]), h.make_node("Neg", ["e1"], ["e2"])], "else", [],
                          [_vi("e1", f, s), _vi("e2", f, s)])
    nodes = [h.make_node("ReduceSum", ["x"], ["s"], keepdims=0), h.make_node("Greater", ["s", "zero"], ["c"]),
             h.make_node("If", ["c"], ["o1", "o2"], name="outer_if", then_branch=then, else_branch=orelse),
             h.make_node("Add", ["o1", "o2"], ["out"])]
    w = np.random.default_rng(0).standard_normal(s).astype(np.float32)
    return _model(nodes, [_vi("x", f, s), _vi("y", f, s)], [_vi("out", f, s), _vi("o2", f, s)],
                  [h.make_tensor("zero", f, [], [0.0]), numpy_helper.from_array(w, "w")])


def loop(early: bool = True, trip_input: bool = False):
    """``Loop(M, true, a0, b0)``: ``a += x``, ``b += float(i)``; with ``early`` the condition is
    ``sum(a) < 6`` (stops early), else the body passes it on and scans ``2 * a`` per iteration (M = 5).
    ``trip_input``: M is an int64 input rather than an initializer."""
    from onnx import TensorProto as T, helper as h
    f = T.FLOAT
    body_nodes = [h.make_node("Add", ["a_in", "x"], ["a_out"]), h.make_node("Mul", ["a_out", "two"], ["scan_out"]),
                  h.make_node("Cast", ["it"], ["itf"], to=f), h.make_node("Add", ["b_in", "itf"], ["b_out"])]
    body_nodes += ([h.make_node("ReduceSum", ["a_out"], ["sa"], keepdims=0), h.make_node("Less", ["sa", "limit"], ["c_out"])]
                   if early else [h.make_node("Identity", ["c_in"], ["c_out"])])
    outs = [_vi("c_out", T.BOOL, []), _vi("a_out", f, [4]), _vi("b_out", f, [1])] + ([] if early else [_vi("scan_out", f, [4])])
    body = h.make_graph(body_nodes, "body", [_vi("it", T.INT64, []), _vi("c_in", T.BOOL, []), _vi("a_in", f, [4]),
                                             _vi("b_in", f, [1])], outs)
    inits = [h.make_tensor("two", f, [], [2.0]), h.make_tensor("cond0", T.BOOL, [], [True])]
    inits += [h.make_tensor("limit", f, [], [6.0])] if early else []
    inputs = [_vi("x", f, [4]), _vi("a0", f, [4]), _vi("b0", f, [1])]
    if trip_input:
        inputs.append(_vi("M", T.INT64, []))
    else:
        inits.append(h.make_tensor("M", T.INT64, [], [5]))
    names = ["a_f", "b_f"] + ([] if early else ["scans"])
    outputs = [_vi("a_f", f, [4]), _vi("b_f", f, [1])] + ([] if early else [_vi("scans", f, [5, 4])])
    return _model([h.make_node("Loop", ["M", "cond0", "a0", "b0"], names, name="loop", body=body)], inputs, outputs,
                  inits)


def loop_with_if():
    """A Loop (M = 4) whose body holds an If on a carried value reading an outer value:
    ``a = If(sum(a) > 0, a * x, a - x)``, the iteration number passed through as a scan output."""
    from onnx import TensorProto as T, helper as h
    f = T.FLOAT
    then = h.make_graph([h.make_node("Mul", ["a_in", "x"], ["p"])], "then", [], [_vi("p", f, [4])])
    orelse = h.make_graph([h.make_node("Sub", ["a_in", "x"], ["q"])], "else", [], [_vi("q", f, [4])])
    body = h.make_graph([h.make_node("ReduceSum", ["a_in"], ["s"], keepdims=0),
                         h.make_node("Greater", ["s", "zero"], ["c"]),
                         h.make_node("If", ["c"], ["a_out"], name="step", then_branch=then, else_branch=orelse),
                         h.make_node("Identity", ["c_in"], ["c_out"]), h.make_node("Identity", ["it"], ["it_out"])],
                        "body", [_vi("it", T.INT64, []), _vi("c_in", T.BOOL, []), _vi("a_in", f, [4])],
                        [_vi("c_out", T.BOOL, []), _vi("a_out", f, [4]), _vi("it_out", T.INT64, [])])
    inits = [h.make_tensor("zero", f, [], [0.0]), h.make_tensor("M", T.INT64, [], [4])]
    return _model([h.make_node("Loop", ["M", "", "a0"], ["a_f", "its"], name="loop", body=body)],
                  [_vi("x", f, [4]), _vi("a0", f, [4])], [_vi("a_f", f, [4]), _vi("its", T.INT64, [4])], inits)


def loop_counter(cond_from_initializer: bool = False):
    """tf2onnx's while loop: no trip count; a carried counter ``j`` (from 0) and the condition
    ``j + 1 < 5`` computed in the body; ``h = tanh(h * x + j)`` carried and scanned (5 iterations).
    ``cond_from_initializer``: the first condition is ``Less(0.0, float(shape(x)[0]))`` on a float
    initializer, as tf2onnx writes a Keras LSTM's (chars2vec)."""
    from onnx import TensorProto as T, helper as h
    f = T.FLOAT
    body = h.make_graph([h.make_node("Add", ["j_in", "one"], ["j_out"]), h.make_node("Less", ["j_out", "five"], ["c_out"]),
                         h.make_node("Cast", ["j_in"], ["jf"], to=f), h.make_node("Mul", ["h_in", "x"], ["hx"]),
                         h.make_node("Add", ["hx", "jf"], ["hj"]), h.make_node("Tanh", ["hj"], ["h_out"]),
                         h.make_node("Identity", ["h_out"], ["h_scan"])], "body",
                        [_vi("it", T.INT64, []), _vi("c_in", T.BOOL, []), _vi("j_in", T.INT64, []), _vi("h_in", f, [3])],
                        [_vi("c_out", T.BOOL, []), _vi("j_out", T.INT64, []), _vi("h_out", f, [3]), _vi("h_scan", f, [3])])
    inits = [h.make_tensor("one", T.INT64, [], [1]), h.make_tensor("five", T.INT64, [], [5]),
             h.make_tensor("j0", T.INT64, [], [0]), h.make_tensor("t", T.BOOL, [], [True])]
    first = []
    if cond_from_initializer:
        inits[3] = h.make_tensor("zero", f, [], [0.0])
        first = [h.make_node("Shape", ["x"], ["xs"]), h.make_node("Cast", ["xs"], ["xsf"], to=f),
                 h.make_node("ReduceMax", ["xsf"], ["n"], keepdims=0), h.make_node("Less", ["zero", "n"], ["t"])]
    return _model(first + [h.make_node("Loop", ["", "t", "j0", "h0"], ["j_f", "h_f", "hs"], name="while", body=body)],
                  [_vi("x", f, [3]), _vi("h0", f, [3])],
                  [_vi("j_f", T.INT64, []), _vi("h_f", f, [3]), _vi("hs", f, [5, 3])], inits)


def loop_invariant():
    """tf2onnx's Keras LSTM loop: weights carried through the body unchanged.  A Loop (M = 4) carries ``h``,
    ``W`` (an initializer; the body output is its input, same name) and ``b`` (a graph input, passed on by an
    Identity); ``h = tanh(h W + b)``, scanned; the final ``W`` and ``b`` are outputs too."""
    from onnx import TensorProto as T, helper as h, numpy_helper
    f = T.FLOAT
    body = h.make_graph([h.make_node("MatMul", ["h_in", "W_in"], ["hw"]), h.make_node("Add", ["hw", "b_in"], ["hb"]),
                         h.make_node("Tanh", ["hb"], ["h_out"]), h.make_node("Identity", ["h_out"], ["h_scan"]),
                         h.make_node("Identity", ["b_in"], ["b_out"]), h.make_node("Identity", ["c_in"], ["c_out"])],
                        "body", [_vi("it", T.INT64, []), _vi("c_in", T.BOOL, []), _vi("h_in", f, [3]),
                                 _vi("W_in", f, [3, 3]), _vi("b_in", f, [3])],
                        [_vi("c_out", T.BOOL, []), _vi("h_out", f, [3]), _vi("W_in", f, [3, 3]), _vi("b_out", f, [3]),
                         _vi("h_scan", f, [3])])
    w = np.random.default_rng(0).standard_normal((3, 3)).astype(np.float32)
    inits = [h.make_tensor("M", T.INT64, [], [4]), h.make_tensor("t", T.BOOL, [], [True]),
             numpy_helper.from_array(w, "W")]
    return _model([h.make_node("Loop", ["M", "t", "h0", "W", "b"], ["h_f", "W_f", "b_f", "hs"], name="lstm", body=body)],
                  [_vi("h0", f, [3]), _vi("b", f, [3])],
                  [_vi("h_f", f, [3]), _vi("W_f", f, [3, 3]), _vi("b_f", f, [3]), _vi("hs", f, [4, 3])], inits)


def loop_swap():
    """A Loop (M = 3) whose body passes its carried values on swapped: ``(a, b) = (b, a + x)``, and scans
    ``b``: a carried value's next value is another carried value (``b`` is read after ``a`` is written)."""
    from onnx import TensorProto as T, helper as h
    f = T.FLOAT
    body = h.make_graph([h.make_node("Identity", ["b_in"], ["a_out"]), h.make_node("Add", ["a_in", "x"], ["b_out"]),
                         h.make_node("Identity", ["c_in"], ["c_out"]), h.make_node("Identity", ["b_in"], ["b_scan"])],
                        "body", [_vi("it", T.INT64, []), _vi("c_in", T.BOOL, []), _vi("a_in", f, [4]), _vi("b_in", f, [4])],
                        [_vi("c_out", T.BOOL, []), _vi("a_out", f, [4]), _vi("b_out", f, [4]), _vi("b_scan", f, [4])])
    inits = [h.make_tensor("M", T.INT64, [], [3]), h.make_tensor("t", T.BOOL, [], [True])]
    return _model([h.make_node("Loop", ["M", "t", "a0", "b0"], ["a_f", "b_f", "bs"], name="swap", body=body)],
                  [_vi("x", f, [4]), _vi("a0", f, [4]), _vi("b0", f, [4])],
                  [_vi("a_f", f, [4]), _vi("b_f", f, [4]), _vi("bs", f, [3, 4])], inits)


def loop_exchange():
    """A Loop (M = 3) whose body exchanges its carried values, ``(a, b) = (b, a)``, and scans ``a - b``:
    each carried value's next value is the other's current one (wrong unless one is saved first)."""
    from onnx import TensorProto as T, helper as h
    f = T.FLOAT
    body = h.make_graph([h.make_node("Identity", ["b_in"], ["a_out"]), h.make_node("Identity", ["a_in"], ["b_out"]),
                         h.make_node("Identity", ["c_in"], ["c_out"]), h.make_node("Sub", ["a_in", "b_in"], ["d"])],
                        "body", [_vi("it", T.INT64, []), _vi("c_in", T.BOOL, []), _vi("a_in", f, [4]), _vi("b_in", f, [4])],
                        [_vi("c_out", T.BOOL, []), _vi("a_out", f, [4]), _vi("b_out", f, [4]), _vi("d", f, [4])])
    inits = [h.make_tensor("M", T.INT64, [], [3]), h.make_tensor("t", T.BOOL, [], [True])]
    return _model([h.make_node("Loop", ["M", "t", "a0", "b0"], ["a_f", "b_f", "ds"], name="exchange", body=body)],
                  [_vi("a0", f, [4]), _vi("b0", f, [4])],
                  [_vi("a_f", f, [4]), _vi("b_f", f, [4]), _vi("ds", f, [3, 4])], inits)


def scan():
    """``Scan`` of state ``s`` over ``xs`` (axis 1, forward) and ``ys`` (axis 0, reverse): ``s = (s + x) * y``;
    scan outputs ``sigmoid(s)`` (axis 1, reverse) and ``x - bias`` (axis 0)."""
    from onnx import TensorProto as T, helper as h, numpy_helper
    f = T.FLOAT
    body = h.make_graph([h.make_node("Add", ["s_in", "xi"], ["t"]), h.make_node("Mul", ["t", "yi"], ["s_out"]),
                         h.make_node("Sigmoid", ["s_out"], ["o1"]), h.make_node("Sub", ["xi", "bias"], ["o2"])], "body",
                        [_vi("s_in", f, [3]), _vi("xi", f, [3]), _vi("yi", f, [3])],
                        [_vi("s_out", f, [3]), _vi("o1", f, [3]), _vi("o2", f, [3])])
    node = h.make_node("Scan", ["s0", "xs", "ys"], ["s_f", "o1s", "o2s"], name="scan", body=body, num_scan_inputs=2,
                       scan_input_axes=[1, 0], scan_input_directions=[0, 1], scan_output_axes=[1, 0],
                       scan_output_directions=[1, 0])
    bias = numpy_helper.from_array(np.array([0.5, -0.5, 0.25], np.float32), "bias")
    return _model([node], [_vi("s0", f, [3]), _vi("xs", f, [3, 6]), _vi("ys", f, [6, 3])],
                  [_vi("s_f", f, [3]), _vi("o1s", f, [3, 6]), _vi("o2s", f, [6, 3])], [bias])


def loop_slice_at_counter(trips: int = 4, bounded: bool = True, offset: int = 0):
    """A Loop (M = ``trips``) over the rows of ``x`` (4 x 3): row ``Slice(x, s, min(rows, s + 1))`` at
    ``s = i + offset`` (``i`` the iteration number; a negative ``s`` counts from the end) is added to the carried
    ``h = tanh(h + row)``, scanned.  Its length is 1 at every iteration only where the ranges prove it: with
    ``trips`` 5 the last slice is empty; without the ``min`` (``bounded``) the end may pass the rows; with
    ``offset`` -4 and 4 trips the last end is 0 (empty, not "to the end")."""
    from onnx import TensorProto as T, helper as h, numpy_helper
    f = T.FLOAT
    end = ["Min", "rows", "i2"] if bounded else ["Identity", "i2"]
    body = h.make_graph([h.make_node("Unsqueeze", ["it", "axis0"], ["i0"]), h.make_node("Add", ["i0", "offset"], ["i1"]),
                         h.make_node("Add", ["i1", "one"], ["i2"]),
                         h.make_node("Shape", ["x"], ["xs"]), h.make_node("Gather", ["xs", "axis0"], ["rows"]),
                         h.make_node(end[0], end[1:], ["end"]),
                         h.make_node("Slice", ["x", "i1", "end", "axis0"], ["row"], name="row_at_step"),
                         h.make_node("Reshape", ["row", "flat"], ["r"]), h.make_node("Add", ["h_in", "r"], ["hr"]),
                         h.make_node("Tanh", ["hr"], ["h_out"]), h.make_node("Identity", ["h_out"], ["h_scan"]),
                         h.make_node("Identity", ["c_in"], ["c_out"])], "body",
                        [_vi("it", T.INT64, []), _vi("c_in", T.BOOL, []), _vi("h_in", f, [3])],
                        [_vi("c_out", T.BOOL, []), _vi("h_out", f, [3]), _vi("h_scan", f, [3])])
    inits = [h.make_tensor("M", T.INT64, [], [trips]), h.make_tensor("t", T.BOOL, [], [True]),
             numpy_helper.from_array(np.array([0], np.int64), "axis0"),
             numpy_helper.from_array(np.array([1], np.int64), "one"),
             numpy_helper.from_array(np.array([offset], np.int64), "offset"),
             numpy_helper.from_array(np.array([3], np.int64), "flat")]
    return _model([h.make_node("Loop", ["M", "t", "h0"], ["h_f", "hs"], name="rows", body=body)],
                  [_vi("x", f, [4, 3]), _vi("h0", f, [3])], [_vi("h_f", f, [3]), _vi("hs", f, [trips, 3])], inits)


def loop_slice_at_carried_counter(counted: bool = True):
    """PP-Structure SLANet's decoder in small (a PaddlePaddle export): no trip count; a carried counter ``j``
    (from 0) counted in float (``j + 1`` cast to float and back); ``Slice(x, j, min(rows, j + 1))`` and
    ``Range(j, min(rows, j + 1))`` at the counter; ``h = tanh(h + row * (range + 1))``; a carried ``done``
    that enters as ``bool[]`` and leaves as ``bool[1]``, set by an If whose branches give ``bool[]`` (a
    constant) and ``bool[1]``; a carried ``last`` that enters as a ``float32[]`` placeholder and leaves as the
    row, never read.  The condition ``j + 1 < rows and not done`` (``done``: ``sum(h) > 0.5``) stops on the
    data too, so only the counter bounds the loop (at 4 iterations); without ``counted``, the condition is
    ``not done`` alone: nothing bounds the counter, and the slice is refused."""
    from onnx import TensorProto as T, helper as h, numpy_helper
    f, b = T.FLOAT, T.BOOL
    then = h.make_graph([h.make_node("Constant", [], ["yes"], value=h.make_tensor("v", b, [], [True]))], "then", [],
                        [_vi("yes", b, [])])
    orelse = h.make_graph([h.make_node("Reshape", ["done_in", "flat1"], ["was"])], "else", [], [_vi("was", b, [1])])
    body = h.make_graph([h.make_node("Cast", ["j_in"], ["jf"], to=f), h.make_node("Add", ["jf", "onef"], ["j1f"]),
                         h.make_node("Cast", ["j1f"], ["j_out"], to=T.INT64),
                         h.make_node("Shape", ["x"], ["xs"]), h.make_node("Gather", ["xs", "axis0"], ["rows"]),
                         h.make_node("Min", ["rows", "j_out"], ["end"]),
                         h.make_node("Slice", ["x", "j_in", "end", "axis0"], ["row"], name="row_at_counter"),
                         h.make_node("Squeeze", ["j_in"], ["js"]), h.make_node("Squeeze", ["end"], ["es"]),
                         h.make_node("Range", ["js", "es", "step"], ["rng"]),
                         h.make_node("Cast", ["rng"], ["rngf"], to=f), h.make_node("Add", ["rngf", "onef"], ["w"]),
                         h.make_node("Mul", ["row", "w"], ["rw"]), h.make_node("Reshape", ["rw", "flat"], ["r"]),
                         h.make_node("Add", ["h_in", "r"], ["hr"]), h.make_node("Tanh", ["hr"], ["h_out"]),
                         h.make_node("ReduceSum", ["h_out"], ["hsum"], keepdims=0),
                         h.make_node("Less", ["half", "hsum"], ["big"]),
                         h.make_node("If", ["big"], ["done_if"], name="finished", then_branch=then, else_branch=orelse),
                         h.make_node("Cast", ["done_if"], ["done_i"], to=T.INT64),
                         h.make_node("Add", ["done_i", "zero1"], ["done_a"]),
                         h.make_node("Cast", ["done_a"], ["done_out"], to=b),
                         h.make_node("Less", ["j_out", "rows"], ["more"]), h.make_node("Not", ["done_out"], ["going"]),
                         h.make_node("And" if counted else "Or", ["more", "going"] if counted else ["going", "going"],
                                     ["c2"]), h.make_node("Squeeze", ["c2"], ["c_out"]),
                         h.make_node("Identity", ["row"], ["last_out"])],
                        "body", [_vi("it", T.INT64, []), _vi("c_in", b, []), _vi("j_in", T.INT64, [1]),
                                 _vi("h_in", f, [3]), _vi("done_in", b, None), _vi("last_in", f, None)],
                        [_vi("c_out", b, []), _vi("j_out", T.INT64, [1]), _vi("h_out", f, [3]), _vi("done_out", b, None),
                         _vi("last_out", f, None)])
    inits = [h.make_tensor("t", b, [], [True]), numpy_helper.from_array(np.array([0], np.int64), "j0"),
             numpy_helper.from_array(np.array([0], np.int64), "axis0"),
             numpy_helper.from_array(np.array(1, np.int64), "step"),
             numpy_helper.from_array(np.array([3], np.int64), "flat"),
             numpy_helper.from_array(np.array([1], np.int64), "flat1"),
             numpy_helper.from_array(np.array([0], np.int64), "zero1"),
             h.make_tensor("done0", b, [], [False]), h.make_tensor("last0", f, [], [0.0]),
             h.make_tensor("onef", f, [], [1.0]), h.make_tensor("half", f, [], [0.5])]
    return _model([h.make_node("Loop", ["", "t", "j0", "h0", "done0", "last0"], ["j_f", "h_f", "done_f", "last_f"],
                               name="decoder", body=body)],
                  [_vi("x", f, [4, 3]), _vi("h0", f, [3])],
                  [_vi("j_f", T.INT64, [1]), _vi("h_f", f, [3]), _vi("done_f", b, [1]), _vi("last_f", f, [1, 3])], inits)


def if_one_branch_invalid():
    """``If(k == 1, x reshaped to (2, 3), x reshaped with a shape that only fits other input sizes)``
    (silero-vad's 8 kHz branch given 16 kHz frames): the else branch cannot run at x's bound shape."""
    from onnx import TensorProto as T, helper as h, numpy_helper
    f = T.FLOAT
    ok = h.make_graph([h.make_node("Reshape", ["x", "s23"], ["r1"])], "ok", [], [_vi("r1", f, [2, 3])])
    bad = h.make_graph([h.make_node("Reshape", ["x", "s45"], ["r2"])], "bad", [], [_vi("r2", f, [2, 3])])
    nodes = [h.make_node("Equal", ["k", "one"], ["c"]),
             h.make_node("If", ["c"], ["y"], name="pick", then_branch=ok, else_branch=bad)]
    inits = [numpy_helper.from_array(np.array([2, 3], np.int64), "s23"),
             numpy_helper.from_array(np.array([4, 5], np.int64), "s45"),
             numpy_helper.from_array(np.array(1, np.int64), "one")]
    return _model(nodes, [_vi("x", f, [6]), _vi("k", T.INT64, [])], [_vi("y", f, [2, 3])], inits)


def feeds(model, rng, ints=3) -> dict:
    """Fresh inputs for ``model``: floats from a normal distribution, int64 inputs ``ints``."""
    from onnx import TensorProto
    out = {}
    for vi in model.graph.input:
        t = vi.type.tensor_type
        shape = [d.dim_value for d in t.shape.dim]
        out[vi.name] = np.full(shape, ints, np.int64) if t.elem_type == TensorProto.INT64 else \
            rng.standard_normal(shape).astype(np.float32)
    return out


def onnxruntime_outputs(model, feed: dict) -> list:
    import onnxruntime as ort
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)


def if_feeds(rng) -> list[dict]:
    """Inputs of :func:`if_nested` taking each path: outer then (inner then / else) and outer else."""
    x, y = (rng.standard_normal((2, 3)).astype(np.float32) for _ in range(2))
    return [{"x": np.abs(x), "y": -np.abs(y)}, {"x": np.abs(x), "y": np.abs(y)}, {"x": -np.abs(x), "y": y}]


def trip_feeds(rng) -> list[dict]:
    """Inputs of ``loop(trip_input=True)``: trip counts 0, 1, 3, 9; ``sum(a)`` grows, so the condition
    stops the longer ones early."""
    model = loop(trip_input=True)
    out = []
    for trips in (0, 1, 3, 9):
        feed = feeds(model, rng, ints=trips)
        feed["x"] = np.abs(feed["x"]) + 0.5
        out.append(feed)
    return out


#: name -> (model maker, fresh inputs (a list of feeds) from an rng): every kind of control flow, for
#: the targets' tests (If, nested If, Loop with a trip count input, while, Scan, swapped carried values)
CASES = {
    "if_nested": (if_nested, if_feeds),
    "loop_early": (loop, None),
    "loop_scan_outputs": (lambda: loop(early=False), None),
    "loop_trip_input": (lambda: loop(trip_input=True), trip_feeds),
    "while": (loop_counter, None),
    "scan": (scan, None),
    "loop_swap": (loop_swap, None),
    "loop_exchange": (loop_exchange, None),
    "if_in_loop": (loop_with_if, None),
}


def case_feeds(name: str, model, rng) -> list[dict]:
    """Fresh inputs for case ``name`` (two draws where the case has no list of its own)."""
    special = CASES[name][1]
    return special(rng) if special is not None else [feeds(model, rng) for _ in range(2)]


def loop_typed_for_three():
    """A graph (not ONNX) whose loop's scan output is typed for 3 iterations while its trip count ``M`` is
    an input: running it other than 3 times must raise by name.  Returns the graph."""
    from tensorir import graph
    from tensorir.graph import Const, TensorType, Var, call
    f = TensorType((3,), "float32")
    it, c, a = Var("it", TensorType((), "int64")), Var("c", TensorType((), "bool")), Var("a", f)
    body = graph.Graph((it, c, a), (c, call("add", a, Const(np.ones(3, np.float32))),
                                    call("multiply", a, Const(np.float32(2)))))
    trip, a0 = Var("M", TensorType((), "int64")), Var("a0", f)
    outs = [call("loop", trip, Const(np.bool_(True)), a0, body=body, num_carried=1, trips=3, output_index=k)
            for k in range(2)]
    return graph.Graph((trip, a0), tuple(outs))


def thousand_iterations() -> dict:
    """Inputs of ``loop(trip_input=True)`` running 1000 iterations (``x = 0``: the condition stays true)."""
    return {"x": np.zeros(4, np.float32), "a0": np.zeros(4, np.float32), "b0": np.zeros(1, np.float32),
            "M": np.array(1000, np.int64)}


def in_threads(check, jobs, repeat: int) -> None:
    """``check(*job)`` ``repeat`` times in a thread of its own per job; the first error is raised."""
    import threading
    errors = []

    def work(*job):
        try:
            for _ in range(repeat):
                check(*job)
        except Exception as e:  # noqa: BLE001 - reported by the calling thread
            errors.append(e)
    threads = [threading.Thread(target=work, args=job) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def close(got, want, atol: float = 1e-6) -> None:
    """Each output of ``got`` has the shape and dtype of ``want``'s and its values within ``1e-5`` relative
    and ``atol`` times ``1 + max |want|``."""
    for a, b in zip(got, want, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=atol * (1 + float(np.abs(b).max())))
