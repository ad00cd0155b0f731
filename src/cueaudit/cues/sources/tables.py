"""Reading source tables (CSV/TSV, XLSX, Parquet) with validation that names file and field."""

from __future__ import annotations

import csv
import io
import re
import zipfile
from collections.abc import Sequence
from pathlib import Path
from xml.etree import ElementTree

import polars as pl

from cueaudit.errors import InputError
from cueaudit.io import read_bytes_checked

_NS = {"m": "http://schemas.openxmlformats.org/spreadsheetml/2006/main"}
_REL = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"


def _col_index(ref: str) -> int:
    letters = re.match(r"[A-Z]+", ref)
    n = 0
    for ch in letters.group(0) if letters else "A":
        n = n * 26 + ord(ch) - 64
    return n - 1


def read_xlsx_rows(path: str | Path, sheet: str) -> list[list[str]]:
    """Cell values of one worksheet as strings (no third-party dependency)."""
    src = str(path)
    try:
        with zipfile.ZipFile(path) as book:
            names = set(book.namelist())
            shared: list[str] = []
            if "xl/sharedStrings.xml" in names:
                root = ElementTree.fromstring(book.read("xl/sharedStrings.xml"))
                shared = [
                    "".join(t.text or "" for t in si.iter(f"{{{_NS['m']}}}t"))
                    for si in root.findall("m:si", _NS)
                ]
            workbook = ElementTree.fromstring(book.read("xl/workbook.xml"))
            rels = ElementTree.fromstring(book.read("xl/_rels/workbook.xml.rels"))
            targets = {r.get("Id"): r.get("Target") for r in rels}
            sheets = {
                s.get("name"): targets.get(s.get(_REL))
                for s in workbook.iter(f"{{{_NS['m']}}}sheet")
            }
            if sheet not in sheets:
                raise InputError(src, f"no sheet {sheet!r} (sheets: {list(sheets)})", "sheet")
            target = str(sheets[sheet]).lstrip("/")
            target = target if target.startswith("xl/") else f"xl/{target}"
            data = ElementTree.fromstring(book.read(target))
    except (zipfile.BadZipFile, KeyError, ElementTree.ParseError) as exc:
        raise InputError(src, f"not a readable .xlsx workbook ({exc})") from None
    rows: list[list[str]] = []
    for row in data.iter(f"{{{_NS['m']}}}row"):
        values: dict[int, str] = {}
        for cell in row.findall("m:c", _NS):
            kind = cell.get("t")
            v = cell.find("m:v", _NS)
            if kind == "s" and v is not None:
                text = shared[int(v.text or 0)]
            elif kind == "inlineStr":
                text = "".join(t.text or "" for t in cell.iter(f"{{{_NS['m']}}}t"))
            else:
                text = v.text if v is not None and v.text is not None else ""
            values[_col_index(cell.get("r", "A"))] = text
        if values:
            rows.append([values.get(i, "") for i in range(max(values) + 1)])
    return rows


def read_delimited(path: str | Path, header: bool = True) -> list[list[str]]:
    """Rows of a comma- or tab-separated file (delimiter sniffed from the first line)."""
    text = read_bytes_checked(path)
    first = text.split("\n", 1)[0]
    delimiter = "\t" if first.count("\t") > first.count(",") else ","
    try:
        return [r for r in csv.reader(io.StringIO(text, newline=""), delimiter=delimiter) if r]
    except csv.Error as exc:
        raise InputError(str(path), f"malformed delimited text: {exc}") from None


def read_table(
    path: str | Path,
    required: Sequence[str],
    numeric: Sequence[str] = (),
    *,
    aliases: dict[str, Sequence[str]] | None = None,
    sheet: str = "Data",
) -> pl.DataFrame:
    """A source table with ``required`` columns (first alias found wins), numeric ones as
    Float64 and the rest as stripped strings. Raises InputError naming file and field."""
    path = Path(path)
    src = str(path)
    if not path.is_file():
        raise InputError(src, "file not found")
    if path.stat().st_size == 0:
        raise InputError(src, "file is empty")
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        frame = pl.read_parquet(path)
        header = frame.columns
        rows = [[("" if v is None else str(v)) for v in r] for r in frame.iter_rows()]
    else:
        table = (
            read_xlsx_rows(path, sheet) if suffix in (".xlsx", ".xlsm") else (read_delimited(path))
        )
        if not table:
            raise InputError(src, "file is empty")
        header, rows = [h.strip() for h in table[0]], table[1:]
    lower = {h.lower(): i for i, h in enumerate(header) if h}
    columns: dict[str, list[str]] = {}
    for name in required:
        options = [name, *((aliases or {}).get(name, ()))]
        index = next((lower[o.lower()] for o in options if o.lower() in lower), None)
        if index is None:
            raise InputError(src, f"required column missing (header is {header})", field=name)
        columns[name] = [(r[index] if index < len(r) else "").strip() for r in rows]
    if not rows:
        raise InputError(src, "no data rows below the header")
    out: dict[str, pl.Series] = {}
    for name, values in columns.items():
        if name in numeric:
            parsed = []
            for line, value in enumerate(values, start=2):
                try:
                    parsed.append(float(value) if value else None)
                except ValueError:
                    raise InputError(
                        src, f"row {line}: {value!r} is not a number", field=name
                    ) from None
            out[name] = pl.Series(name, parsed, dtype=pl.Float64)
        else:
            out[name] = pl.Series(name, values, dtype=pl.String)
    return pl.DataFrame(out)
