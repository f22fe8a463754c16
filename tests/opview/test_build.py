"""The op view: distinct ops of real kernel tables with exact sums, and its aggregates against a plain groupby."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor_core.model.run import load_run
from advisor_core.opview.build import SIGNATURE_COLUMNS, op_view_from_table


def _rank(path):
    run = load_run(path)
    (rank,) = list(run)
    return rank


def test_real_sample_with_repeated_kernels(msprof) -> None:
    rank = _rank(msprof / "ut__advisor__compute_advice__data")
    view = rank.op_view()
    assert view is rank.op_view()  # built once, cached on the rank
    assert (view.rows, len(view.ops), view.steps, view.step_ids) == (29, 8, 1, (19,))
    mm = view.ops.iloc[0]
    assert (mm["name"], mm["type"], mm["accelerator_core"]) == ("aclnnMatmul_MatMulCommon_MatMulV2", "MatMulV2", "AI_CORE")
    assert (int(mm["count"]), round(mm["total_us"], 3), mm["min_us"], mm["max_us"]) == (4, 750.595, 185.504, 190.544)
    assert mm["in_shapes"] == ((81920, 4096), (8192, 512)) and mm["out_shapes"] == ((4096, 512),)
    assert mm["in_dtypes"] == ("DT_BF16", "DT_BF16") and mm["in_formats"] == ("ND", "ND")
    # one kernel name, two signatures: the Add on full tensors and the Add on scalars
    adds = view.ops[view.ops["name"] == "aclnnAdd_AddAiCore_Add"]
    assert [(int(c), round(t, 3)) for c, t in zip(adds["count"], adds["total_us"])] == [(4, 110.082), (4, 5.92)]
    assert list(adds["in_shapes"]) == [((512, 2, 4096), (512, 2, 4096)), ((), ())]
    by_type = view.ops.groupby("type")["total_us"].sum().round(3)
    assert by_type["MatMulV3"] == 4122.342 and by_type["FlashAttentionScoreGrad"] == 3038.44
    assert round(float(view.ops["total_us"].sum()), 3) == round(float(rank.table("kernels")["duration_us"].sum()), 3)


def test_real_sample_timeline_and_comm(msprof) -> None:
    rank = _rank(msprof / "ut__advisor__advisor_backend__compute_advice")
    view = rank.op_view()
    assert (view.rows, len(view.ops)) == (591, 201)
    tl = view.timeline
    assert len(tl) == 591 and bool(np.all(np.diff(tl.start_ns) >= 0))
    assert tl.start_ns[0] == 1699529622790614800 and tl.op[0] == 0  # ZerosLike46, exact ns
    comm = view.ops[view.ops["is_comm"]]
    assert set(comm["accelerator_core"]) == {"HCCL"}
    assert round(float(comm.loc[comm["type"] == "hcom_broadcast_", "total_us"].sum()), 2) == 308989.62
    assert round(view.busy_us_per_step() + float(comm["total_us"].sum()), 2) == round(float(view.ops["total_us"].sum()), 2)
    # the timeline's op ids point at the op whose name the kernel row has
    names = rank.table("kernels", ["name", "start_ns"]).sort_values("start_ns", kind="stable")["name"].astype(str)
    assert list(view.ops["name"].to_numpy()[tl.op]) == list(names)


def test_names_are_parsed_once_per_op(tmp_path) -> None:
    table = pa.table({
        "name": ["Default/net-Net/layers-CellList/2-Block/wq-Linear/MatMul-op3/aclnnMatmul_MatMulV3",
                 "Gradients/Default/net-Net/layers-CellList/2-Block/wq-Linear/Grad_MatMul/MatMul-op7/aclnnMatmul",
                 "Default/net-Net/layers-CellList/2-Block/wq-Linear/MatMul-op3/aclnnMatmul_MatMulV3"],
        "type": ["MatMulV3", "MatMulV3", "MatMulV3"],
        "duration_us": [10.0, 20.0, 12.0],
        "start_ns": [1000, 5000, 9000],
        "step_id": [1, 1, 2],
    })
    view = op_view_from_table(table)
    assert len(view.ops) == 2 and view.steps == 2
    fwd, bwd = view.ops.iloc[0], view.ops.iloc[1]
    assert (fwd["layer"], fwd["primitive"], fwd["backward"], int(fwd["count"]), fwd["per_step_us"]) == (2, "MatMul", False, 2, 11.0)
    assert (bwd["backward"], bwd["grad"], int(bwd["steps_seen"]), bwd["first_step"], bwd["last_step"]) == (True, "Grad_MatMul", 1, 1, 1)
    assert fwd["cell"] == bwd["cell"] == "Default/net-Net/layers-CellList/2-Block/wq-Linear"


_NAMES = ["a/X-op1/k", "a/Y-op2/k", "Gradients/a/Grad_X/X-op3/k", "hcom_allReduce_1", None]
_SHAPES = ["4096,4100;4100,11008", "1,2", "7", None, '"8,8"']  # the CSV reader reads '' as missing


@st.composite
def kernel_tables(draw):  # type: ignore[no-untyped-def]
    n = draw(st.integers(1, 60))
    pick = lambda pool: draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n))  # noqa: E731
    return pd.DataFrame({
        "name": pick(_NAMES),
        "type": pick(["MatMul", "Cast", "TransData", None]),
        "accelerator_core": pick(["AI_CORE", "HCCL", None]),
        "stream_id": pick([1, 2, None]),
        "input_shapes": pick(_SHAPES),
        "input_formats": pick(["ND", "FRACTAL_NZ;ND", None]),
        "duration_us": draw(st.lists(st.one_of(st.none(), st.floats(0, 1e4)), min_size=n, max_size=n)),
        "start_ns": draw(st.lists(st.one_of(st.none(), st.integers(0, 10**12)), min_size=n, max_size=n)),
        "step_id": pick([1, 2, 5, None]),
    })


@settings(max_examples=120, deadline=None)
@given(kernel_tables())
def test_aggregates_equal_a_plain_groupby(df: pd.DataFrame) -> None:
    table = pa.Table.from_pandas(df.astype({"stream_id": "Int64", "start_ns": "Int64", "step_id": "Int64"}), preserve_index=False)
    table = pa.table({c: (table[c].dictionary_encode() if pa.types.is_string(table[c].type) else table[c])
                      for c in table.column_names})
    view = op_view_from_table(table)
    sig = [c for c in SIGNATURE_COLUMNS if c in df.columns]

    def keys(frame: pd.DataFrame) -> pd.Series:
        cells = frame[sig].astype(object).map(lambda v: "∅" if v is None or v is pd.NA or v != v or v == "" else str(int(v)) if isinstance(v, float) else str(v))
        return cells.agg("|".join, axis=1)

    expect = df.assign(_k=keys(df), _d=df["duration_us"].fillna(0.0)).groupby("_k").agg(count=("_d", "size"),
                                                                                      total=("_d", "sum"))
    got = view.ops.assign(_k=keys(view.ops)).set_index("_k")
    assert len(view.ops) == len(expect) and view.rows == len(df) and got.index.is_unique
    for key, row in expect.iterrows():
        assert int(got.at[key, "count"]) == row["count"]
        assert np.isclose(got.at[key, "total_us"], row["total"])
    steps = df["step_id"].dropna().unique()
    assert view.steps == max(len(steps), 1)
    assert len(view.timeline) == int(df["start_ns"].notna().sum())
    assert bool(np.all(np.diff(view.timeline.start_ns) >= 0))
    assert int(view.ops["count"].sum()) == len(df)


@st.composite
def code_columns(draw):  # type: ignore[no-untyped-def]
    """Signature codes as the op view's build makes them: −1 for missing, sizes up to 2^31 (so the key re-numbers)."""
    n = draw(st.integers(1, 80))
    cols = []
    for _ in range(draw(st.integers(1, 6))):
        size = draw(st.sampled_from([1, 3, 2**20, 2**31]))
        values = draw(st.lists(st.integers(-1, min(size - 1, 4)), min_size=n, max_size=n))
        cols.append((np.array(values, np.int32 if size < 2**31 else np.int64), size))
    return cols, n


@settings(max_examples=150, deadline=None)
@given(code_columns())
def test_group_ids_number_distinct_code_tuples_in_order_of_first_appearance(case) -> None:
    from advisor_core.opview.build import _group_ids

    cols, n = case
    group, first = _group_ids(cols, n)
    rows = list(zip(*(c.tolist() for c, _ in cols)))
    order = list(dict.fromkeys(rows))
    assert group.tolist() == [order.index(r) for r in rows]
    assert first.tolist() == [rows.index(r) for r in order]


def test_codes_of_chunks_with_one_dictionary_or_several() -> None:
    from advisor_core.opview.build import _codes

    shared = pa.array(["x", "y", "z"])
    one = pa.chunked_array([pa.DictionaryArray.from_arrays(pa.array([0, 2]), shared),
                            pa.DictionaryArray.from_arrays(pa.array([2, None, 1]), shared)])
    several = pa.chunked_array([pa.DictionaryArray.from_arrays(pa.array([0, 2]), pa.array(["x", "y", "z"])),
                                pa.DictionaryArray.from_arrays(pa.array([0, None, 1]), pa.array(["z", "y"]))])
    for col in (one, several):
        codes, size = _codes(col)
        labels = dict(zip(codes.tolist(), col.to_pylist()))
        assert [labels[c] for c in codes.tolist()] == ["x", "z", "z", None, "y"] and labels.get(-1, None) is None
        assert len(set(codes.tolist())) == 4 and size >= 3
    disjoint = pa.chunked_array([pa.DictionaryArray.from_arrays(pa.array([0, 0]), pa.array(["a"])),
                                 pa.DictionaryArray.from_arrays(pa.array([0]), pa.array(["b"]))])
    codes, size = _codes(disjoint)
    assert codes.tolist() == [0, 0, 1] and size == 2  # the size counts both chunks' values (the key's radix)
    ids, size = _codes(pa.chunked_array([pa.array([7, None, 9, 7], pa.int64())]))
    assert ids.tolist() == [0, -1, 2, 0] and size == 3  # small ids: the value less the smallest
