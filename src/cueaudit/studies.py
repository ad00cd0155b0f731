"""The registry of studies: the one place that names them.

The workflow and the tests read every study from :data:`STUDIES`; the shared modules take it
as an argument and never import it (see ``docs/architecture.md``). A new study is a package
with a :class:`cueaudit.study.Study` object and one row here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from cueaudit.decision.study import STUDY as DECISION
from cueaudit.probing.study import STUDY as PROBING
from cueaudit.study import Study

STUDIES: Final[Mapping[str, Study]] = {study.name: study for study in (PROBING, DECISION)}
