import gzip
import string
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scalefit import ScaleFitError, read_table
from scalefit.core.table import drop_highest_losses

GOOD = "model_size,FLOP,loss\n1e8,1e19,3.1\n1e9,1e20,2.8\n1e10,1e21,2.5\n"


def write(tmp_path, text, name="t.csv"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_aliases_and_token_derivation(tmp_path):
    t = read_table(write(tmp_path, GOOD))
    assert {"params", "flops", "loss", "tokens"} <= set(t.columns)
    np.testing.assert_allclose(t["tokens"], t["flops"] / (6 * t["params"]))
    assert t.attrs["scalefit"]["derived"] == ["tokens = flops / (6 params)"]


def test_explicit_mapping_and_ambiguous_d():
    df = pd.DataFrame({"N": [1e8, 1e9], "D": [1e9, 1e10], "loss": [3.0, 2.5]})
    with pytest.raises(ScaleFitError, match="ambiguous"):
        read_table(df)
    t = read_table(df, {"D": "tokens"})
    assert "tokens" in t.columns and "flops" in t.columns
    with pytest.raises(ScaleFitError, match="must map onto"):
        read_table(df, {"D": "data"})
    # every column problem in the first error, with one mapping that fixes them all
    ndl = pd.DataFrame({"N": [1e8, 1e9], "D": [1e9, 1e10], "L": [3.0, 2.5]})
    with pytest.raises(ScaleFitError) as err:
        read_table(ndl)
    text = str(err.value)
    assert "column 'D' is ambiguous" in text and "no loss column" in text
    assert "columns={'D': 'tokens', 'L': 'loss'}" in text
    assert list(read_table(ndl, {"D": "tokens", "L": "loss"}).columns)[:3] == [
        "params",
        "tokens",
        "loss",
    ]


def test_drop_highest_rule_with_ties():
    df = pd.DataFrame({"loss": [5.0, 4.0, 4.0, 4.0, 3.0, 2.0]})
    assert list(drop_highest_losses(df, 2)["loss"]) == [3.0, 2.0]
    assert list(drop_highest_losses(df, 1)["loss"]) == [4.0, 4.0, 4.0, 3.0, 2.0]
    with pytest.raises(ScaleFitError, match="drop_highest"):
        drop_highest_losses(df, -1)


def test_duplicate_rows_warn(tmp_path):
    with pytest.warns(UserWarning, match="duplicate row"):
        read_table(write(tmp_path, GOOD + "1e8,1e19,3.1\n"))


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "empty"),
        ("model_size;FLOP;loss\n1;2;3\n", "semicolon-delimited"),
        ("model_size\tFLOP\tloss\n1\t2\t3\n", "tab-delimited"),
        ("loss,loss\n1,2\n", "duplicate column"),
        ("model_size,FLOP\n1e8,1e19\n", "no loss column"),
        ("model_size,FLOP,loss\n", "no rows"),
        ("model_size,FLOP,loss\n1e8,1e19,abc\n", "row 1: expected a number"),
        ("model_size,FLOP,loss\n1e8,1e19,3\n1e9,,2\n", "row 2: a missing value"),
        ("model_size,FLOP,loss\n1e8,inf,3\n", "non-finite"),
        ("model_size,FLOP,loss\n1e8,1e19,-3\n", "not positive"),
        ("model_size,FLOP,loss\n0,1e19,3\n", "not positive"),
    ],
)
def test_bad_tables_name_the_problem(tmp_path, text, match):
    with pytest.raises(ScaleFitError, match=match):
        read_table(write(tmp_path, text))


def test_missing_file():
    with pytest.raises(ScaleFitError, match="no such file"):
        read_table("/nonexistent/table.csv")


BAD_CELL = st.sampled_from(["", "nan", "inf", "-inf", "0", "-1", "abc", "1e", "--"]) | st.text(
    alphabet=string.ascii_letters, min_size=1, max_size=5
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(row=st.integers(0, 3), col=st.integers(0, 2), cell=BAD_CELL)
def test_any_bad_cell_is_reported_with_row_and_column(tmp_path, row, col, cell):
    values = [[1e8, 1e19, 3.1], [2e8, 2e19, 3.0], [4e8, 4e19, 2.9], [8e8, 8e19, 2.8]]
    lines = ["params,flops,loss"]
    for i, r in enumerate(values):
        cells = [repr(v) for v in r]
        if i == row:
            cells[col] = cell
        lines.append(",".join(cells))
    path = write(tmp_path, "\n".join(lines) + "\n", f"h{row}{col}.csv")
    name = ["params", "flops", "loss"][col]
    with pytest.raises(ScaleFitError, match=rf"column '{name}', row {row + 1}"):
        read_table(path)


def test_cli_bad_table_exits_2_with_one_line(tmp_path):
    path = write(tmp_path, "model_size,FLOP,loss\n1e8,1e19,abc\n")
    proc = subprocess.run(
        [sys.executable, "-m", "scalefit", "fit", str(path), "--law", "chinchilla"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "row 1" in proc.stderr


def write_bytes(tmp_path, data, name="b.csv"):
    p = tmp_path / name
    p.write_bytes(data)
    return p


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (gzip.compress(GOOD.encode()), "gzip-compressed"),
        (GOOD.encode("utf-16"), "UTF-16"),
        (GOOD.encode("utf-16-le"), "NUL bytes"),
        ("width,loss,note\n32,3.1,café\n".encode("latin-1"), r"line 2: byte 0xe9 .*UTF-8"),
        (bytes(range(256)) * 4, "NUL bytes"),
    ],
)
def test_undecodable_files_are_named(tmp_path, data, match):
    with pytest.raises(ScaleFitError, match=match) as info:
        read_table(write_bytes(tmp_path, data))
    assert "b.csv" in str(info.value)


def test_index_shift_is_named(tmp_path):
    text = "params,tokens,loss\n0,1e8,1e9,3.1\n1,1e9,1e10,2.8\n"
    with pytest.raises(ScaleFitError, match="every data row has 4 fields.*3 columns"):
        read_table(write(tmp_path, text))


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("params,tokens,loss\n1e8,1e9,3.1\n1e9,1e10\n", "line 3: 2 field"),
        ("params,tokens,loss\n1e8,1e9,3.1\n1e9,1e10,2.8,7\n", "line 3: 4 field"),
        ("width,depth,loss\n1,024,4,3.1\n2,048,8,2.9\n", "line 2: .*thousands separator"),
        ('width,depth,loss\n"1,024",4,3.1\n', r"column 'width', row 1: .*'1,024' \(a thousands"),
        ("params,,loss\n1,2,3\n", "empty column name"),
        ("params,tokens,loss\n1e8,1e9,3.1,\n1e9,1e10,2.8,\n", "ends with an extra comma"),
    ],
)
def test_ragged_rows_and_thousands_separators(tmp_path, text, match):
    with pytest.raises(ScaleFitError, match=match) as info:
        read_table(write(tmp_path, text))
    assert "np.float64" not in str(info.value)


def test_extra_numeric_columns_are_kept_without_positivity(tmp_path):
    text = "params,tokens,loss,steps,lr,x\n1e8,1e9,3.1,100,6e-4,-2\n1e9,1e10,2.8,200,3e-4,0\n"
    t = read_table(write(tmp_path, text))
    assert list(t["steps"]) == [100, 200] and list(t["x"]) == [-2, 0]
    assert t["lr"].dtype == float


def test_value_messages_use_plain_reprs(tmp_path):
    with pytest.raises(ScaleFitError, match=r"\(0\.0\)") as info:
        read_table(write(tmp_path, "params,tokens,loss\n0.0,1e9,3\n"))
    assert "np.float64" not in str(info.value)
