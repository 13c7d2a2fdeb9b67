"""nestc bugs found by tests/diff/onnx_diff.py, each minimized to the graph that shows it.
The fixed batch (onnx_diff.py NESTC, make check) runs every case interpreted and compiled
against the NumPy reference of onnx_ref.py; nothing here holds an expected value.

CASES: [(name, build)], build() -> (onnx ModelProto, {input name: array}).
"""
import numpy as np
from onnx import TensorProto as TP
from onnx import helper as H
from onnx import numpy_helper as NH


def _model(nodes, inputs, outputs, inits, opset=17):
    g = H.make_graph(nodes, "finding", inputs, outputs, initializer=inits)
    return H.make_model(g, opset_imports=[H.make_opsetid("", opset)], producer_name="onnx_diff")


def fold_compare_or_equal():
    """GreaterOrEqual and LessOrEqual of two initializers (broadcast [2, 3] with [3]),
    folded at import: every element came out false (fold_bin in src/onnx/ops.c knows
    Equal, Less and Greater, not the two OrEqual ops). Found by seed 1; the Where after
    it shows how a model goes wrong: the wrong branch everywhere. Equal elements are
    included, where the two ops are true and Less and Greater false."""
    a = np.array([[1.0, 2.0, 3.0], [-1.5, 0.25, 7.0]], np.float32)
    b = np.array([2.0, 0.25, -1.0], np.float32)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    nodes = [H.make_node("GreaterOrEqual", ["a", "b"], ["ge"]), H.make_node("LessOrEqual", ["a", "b"], ["le"]),
             H.make_node("LessOrEqual", ["b", "a"], ["le2"]), H.make_node("Where", ["ge", "x", "a"], ["y"])]
    outs = [H.make_tensor_value_info("ge", TP.BOOL, [2, 3]), H.make_tensor_value_info("le", TP.BOOL, [2, 3]),
            H.make_tensor_value_info("le2", TP.BOOL, [2, 3]), H.make_tensor_value_info("y", TP.FLOAT, [2, 3])]
    m = _model(nodes, [H.make_tensor_value_info("x", TP.FLOAT, [2, 3])], outs,
               [NH.from_array(a, "a"), NH.from_array(b, "b")])
    return m, {"x": x}


def gather_indices_as_output(const_node):
    """A Gather whose indices are known at import (an initializer, or a Constant node)
    and are also a graph output: the import wrote the indices' wrapped copy as a record
    param named after them (param idx: { wrapped: i64[3] }) beside the output's own param
    idx, and the model did not check ("'idx' is already defined"). Found by seed 8007
    (Shape, Gather, Sub and Range make the indices there)."""
    def build():
        idx = np.array([4, 3, -1, 0], np.int64)
        nodes, inits = [], []
        if const_node:
            nodes.append(H.make_node("Constant", [], ["idx"], value=NH.from_array(idx, "v")))
        else:
            inits.append(NH.from_array(idx, "idx"))
        nodes.append(H.make_node("Gather", ["x", "idx"], ["y"], axis=1))
        m = _model(nodes, [H.make_tensor_value_info("x", TP.FLOAT, [3, 5])],
                   [H.make_tensor_value_info("y", TP.FLOAT, [3, 4]), H.make_tensor_value_info("idx", TP.INT64, [4])],
                   inits)
        return m, {"x": np.arange(15, dtype=np.float32).reshape(3, 5) - 7}
    return build


def inputs_named_alike():
    """Two graph inputs whose names become the same Nest identifier (x.1 becomes x_1, so
    x_1 becomes in_x_1), each given to `nestc run --input` by its graph name: the mapping
    of graph input names to arguments (src/main.c, the argmap loop of run) goes on after
    a match, so x.1 -> x_1 -> in_x_1, and the run failed (argument 'in_x_1' is f32[3],
    the file holds f32[2, 3]; with equal shapes, "--input in_x_1 is given twice").
    Compiled code, called by argument position, is right. Found by seed 8006 (a Conv's
    image and weights)."""
    x1 = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    x2 = np.array([0.5, -2.0, 3.0], np.float32)
    nodes = [H.make_node("Mul", ["x.1", "x_1"], ["y"])]
    m = _model(nodes, [H.make_tensor_value_info("x.1", TP.FLOAT, [2, 3]), H.make_tensor_value_info("x_1", TP.FLOAT, [3])],
               [H.make_tensor_value_info("y", TP.FLOAT, [2, 3])], [])
    return m, {"x.1": x1, "x_1": x2}


def group_root_named_as_flat_param():
    """A weight v.2, a Constant v.23 and a Constant v_2: GatherElements' indices, known and with
    negative ones, so the import makes their wrapped copy v_2.wrapped. The group v
    cannot be a type (v.23, a graph output, has a child: its wrapped copy v.23.wrapped), so v.2 stays
    a flat param v_2; the root v_2 of v_2.wrapped was let through as if v_2 were one of
    its own flat names, and the text held param v_2 twice ("'v_2' is already defined").
    Found by make fuzz-diff (seed 45963846888)."""
    data = (np.arange(40, dtype=np.float32).reshape(5, 2, 4, 1) * 0.5 - 3).astype(np.float32)
    idx = np.tile(np.array([[[-1], [0]], [[1], [-4]]], np.int64), (5, 1, 1, 1))
    nodes = [H.make_node("Constant", [], ["v_2"], value=NH.from_array(idx, "c")),
             H.make_node("GatherElements", ["v.2", "v_2"], ["g"], axis=2),
             H.make_node("Constant", [], ["v.23"], value=NH.from_array(np.array([-1, 0, 2], np.int64), "d")),
             H.make_node("Gather", ["x", "v.23"], ["h"], axis=0)]
    m = _model(nodes, [H.make_tensor_value_info("x", TP.FLOAT, [3])],
               [H.make_tensor_value_info("g", TP.FLOAT, [5, 2, 2, 1]), H.make_tensor_value_info("h", TP.FLOAT, [3]),
                H.make_tensor_value_info("v.23", TP.INT64, [3])],
               [NH.from_array(data, "v.2")])
    return m, {"x": np.array([1.5, -2.0, 4.0], np.float32)}

CASES = [
    ("fold_greater_or_equal_less_or_equal", fold_compare_or_equal),
    ("gather_initializer_indices_as_output", gather_indices_as_output(False)),
    ("gather_constant_indices_as_output", gather_indices_as_output(True)),
    ("inputs_named_alike", inputs_named_alike),
    ("group_root_named_as_a_flat_param", group_root_named_as_flat_param),
]
