"""What `grep` and `glob` cost on a large tree, against ripgrep (`rg`) on the same tree.

Generates a tree of `--files` small source files (default 50,000: 500 directories two levels
deep, 100 files each, about 1 KiB apiece) in a temporary directory, with a root `.gitignore`
that ignores a `build/` directory and `*.log` files (and a `.git` directory, so that ripgrep
honours the `.gitignore` too). One file in a hundred holds the word `needle_<n>`.

Timed, best of `--repeat` runs after one warm-up run (so the page cache is warm for both):

- `glob {pattern: "**/*.py"}` against `rg --files --glob '*.py'`;
- `grep {pattern: "needle_\\w+"}` against `rg -n 'needle_\\w+'`.

Both sides must find the same number of files and matches; the ratio is our time over rg's.
When `rg` is not on PATH only our figures are reported, and the result says rg is missing.
Human-readable lines go to stderr; stdout gets exactly one line, `TOOLS_PERF_RESULT {json}`.

Run from the repository root: `python benchmarks/tools.py [--files N] [--repeat N]`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from acp_server.agent.tools.search import GlobArgs, GrepArgs, glob, grep
from acp_server.agent.tools.tree import TreeLimits

DIRECTORIES_PER_LEVEL = 20
FILES_PER_DIRECTORY = 100
NEEDLE_EVERY = 100
SUFFIXES = (".py", ".ts", ".md", ".txt")
GREP_PATTERN = r"needle_\w+"


def _body(index: int) -> str:
    lines = [f"# file {index}: generated for the tools benchmark"]
    lines += [f"def function_{index}_{n}(value):  return value * {n} + {index}" for n in range(20)]
    if index % NEEDLE_EVERY == 0:
        lines.insert(10, f"marker = 'needle_{index}'")
    return "\n".join(lines) + "\n"


def make_tree(root: Path, files: int) -> None:
    """`files` files in directories `dNN/dMM/`, plus ignored ones that no tool should see."""
    (root / ".git").mkdir()
    (root / ".gitignore").write_text("build/\n*.log\n")
    per_directory = FILES_PER_DIRECTORY
    directories = max(1, -(-files // per_directory))
    for directory in range(directories):
        parent = root / f"d{directory // DIRECTORIES_PER_LEVEL:02}" / f"d{directory:03}"
        parent.mkdir(parents=True)
        first = directory * per_directory
        for index in range(first, min(first + per_directory, files)):
            suffix = SUFFIXES[index % len(SUFFIXES)]
            (parent / f"file_{index}{suffix}").write_text(_body(index))
        (parent / f"run_{directory}.log").write_text("needle_in_a_log\n")
    build = root / "build"
    build.mkdir()
    for index in range(200):
        (build / f"out_{index}.py").write_text("needle_in_build\n")


def best_of(repeat: int, run: Callable[[], int]) -> tuple[float, int]:
    """The best wall time in seconds over `repeat` runs (after a warm-up), and the count."""
    count = run()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        count = run()
        times.append(time.perf_counter() - started)
    return min(times), count


def rg_lines(argv: list[str], cwd: Path) -> int:
    completed = subprocess.run(argv, cwd=cwd, capture_output=True, check=False)
    if completed.returncode not in (0, 1):
        raise RuntimeError(f"{argv} failed: {completed.stderr.decode(errors='replace')}")
    return completed.stdout.count(b"\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=50_000, help="files in the tree")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each (best kept)")
    options = parser.parse_args(argv)
    rg = shutil.which("rg")
    limits = TreeLimits(grep_max_matches=10**9)
    with tempfile.TemporaryDirectory(prefix="tools-bench-") as temporary:
        root = Path(temporary)
        started = time.perf_counter()
        make_tree(root, options.files)
        print(
            f"tree: {options.files} files in {root} ({time.perf_counter() - started:.1f} s)",
            file=sys.stderr,
        )
        expected_needles = -(-options.files // NEEDLE_EVERY)
        grep_args = GrepArgs(GREP_PATTERN, max_results=expected_needles + 1)

        def ours_glob() -> int:
            return int(glob(GlobArgs("**/*.py"), root, [], limits).raw_output["count"])

        def ours_grep() -> int:
            return int(grep(grep_args, root, [], limits).raw_output["matches"])

        result: dict[str, Any] = {
            "files": options.files,
            "repeat": options.repeat,
            "rg": rg is not None,
        }
        for name, ours, rg_argv in (
            ("glob", ours_glob, [rg or "rg", "--files", "--glob", "*.py"]),
            ("grep", ours_grep, [rg or "rg", "-n", GREP_PATTERN]),
        ):
            ours_s, ours_count = best_of(options.repeat, ours)
            entry: dict[str, Any] = {"ours_s": round(ours_s, 4), "ours_count": ours_count}
            line = f"{name}: ours {ours_s * 1000:.0f} ms ({ours_count} found)"
            if rg is not None:
                rg_s, rg_count = best_of(options.repeat, lambda argv=rg_argv: rg_lines(argv, root))
                ratio = ours_s / rg_s
                entry |= {
                    "rg_s": round(rg_s, 4),
                    "rg_count": rg_count,
                    "ratio": round(ratio, 2),
                    "same_count": ours_count == rg_count,
                }
                line += f", rg {rg_s * 1000:.0f} ms ({rg_count} found): {ratio:.2f}x rg's time"
            result[name] = entry
            print(line, file=sys.stderr)
        if rg is None:
            print("rg is not on PATH: only our own figures were measured", file=sys.stderr)
        print(f"cpus: {os.cpu_count()}", file=sys.stderr)
        result["cpus"] = os.cpu_count()
    print("TOOLS_PERF_RESULT " + json.dumps(result, separators=(",", ":")), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
