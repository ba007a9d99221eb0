"""hybridmem's benchmarks: ``python -m bench`` lists them, ``python -m bench NAME [ARGS]`` runs one
(bench/README.md, bench/registry.py).

Importing the package puts this checkout's ``src/`` first on the path, so a benchmark measures the
code beside it even where another hybridmem is installed (what each script's own path line did).
"""

import sys
from pathlib import Path

_SRC = str(Path(__file__).resolve().parents[1] / "src")
if sys.path[:1] != [_SRC]:
    sys.path.insert(0, _SRC)
