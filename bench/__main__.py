"""``python -m bench``: the maintained benchmarks (bench/registry.py).

python -m bench                  # the list: name, kind, minutes on 2 cores, what it measures, output
python -m bench --markdown       # bench/README.md's table, with each one's last recorded result
python -m bench NAME [ARGS...]   # run bench/NAME.py with ARGS (python -m bench NAME --help: its options)
"""

from __future__ import annotations

import runpy
import sys

from bench.registry import BY_NAME, markdown, table


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help", "--list"):
        print(__doc__.strip() + "\n\n" + table())
        return 0
    if args[0] == "--markdown":
        print(markdown())
        return 0
    name = args[0].removesuffix(".py")
    if name not in BY_NAME:
        print(f"no benchmark {name!r}; one of: {', '.join(BY_NAME)}", file=sys.stderr)
        return 2
    sys.argv = [f"bench/{name}.py", *args[1:]]  # its own argparse sees its arguments
    runpy.run_module(f"bench.{name}", run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
