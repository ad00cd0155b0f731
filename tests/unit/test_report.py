"""Result tables written as CSV with a Markdown copy beside them."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from cueaudit.report import to_markdown, write_table


def test_write_table_writes_csv_and_markdown_beside_it(tmp_path: Path) -> None:
    frame = pl.DataFrame(
        {
            "model": ["m1", "m|2"],
            "rate": [0.123456, float("nan")],
            "tiny": [0.00012, 2.5e7],
            "n": [3, None],
        }
    )
    out = tmp_path / "tables" / "rates.csv"
    write_table(frame, out, "Rates")
    assert out.read_text() == "model,rate,tiny,n\nm1,0.123456,0.00012,3\nm|2,NaN,25000000.0,\n"
    assert out.with_suffix(".md").read_text() == (
        "## Rates\n"
        "\n"
        "| model | rate | tiny | n |\n"
        "|---|---|---|---|\n"
        "| m1 | 0.1235 | 1.200e-04 | 3 |\n"
        "| m\\|2 | NaN | 2.500e+07 |  |\n"
    )
    assert pl.read_csv(out)["rate"][0] == 0.123456


def test_markdown_of_an_empty_table_says_so() -> None:
    frame = pl.DataFrame(schema={"a": pl.String, "b": pl.Float64})
    assert to_markdown(frame) == "| a | b |\n|---|---|\n\n_No rows._\n"


def test_markdown_cells_keep_integers_and_flatten_newlines() -> None:
    frame = pl.DataFrame({"note": ["two\nlines"], "zero": [0.0], "k": [12]})
    assert to_markdown(frame).splitlines()[-1] == "| two lines | 0.0000 | 12 |"
