"""``python -m hybridmem.cli``."""

from . import main

if __name__ == "__main__":
    main()
