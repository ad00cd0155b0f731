"""Make the cueaudit library in src/ importable from workflow scripts without installing it."""

import sys
from pathlib import Path

LIBRARY_DIR = str(Path(__file__).resolve().parents[2] / "src")
# First on the path, ahead of any other installed copy of cueaudit.
if LIBRARY_DIR in sys.path:
    sys.path.remove(LIBRARY_DIR)
sys.path.insert(0, LIBRARY_DIR)
