"""Make the cueaudit library in src/ importable from workflow scripts without installing it."""

import sys
from pathlib import Path

LIBRARY_DIR = str(Path(__file__).resolve().parents[2] / "src")
if LIBRARY_DIR not in sys.path:
    sys.path.insert(0, LIBRARY_DIR)
