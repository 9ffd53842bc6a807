"""Start-up: how long a freshly spawned `acp-server serve` takes to answer its first requests.

Editors spawn the agent each time a thread opens, so this wait is felt every time. Each round
spawns a fresh `python -m acp_server serve --sessions-dir D` (D an empty temporary sessions root,
the working directory a temporary one, so nothing but the code under test is imported) and
measures, from just before the spawn:

- the time to read the answer to `initialize` (written at once, before the process can have
  done anything, as an editor does);
- the time to read the answer to `session/new` (written as soon as `initialize` was answered).

Beside it, in alternating rounds, the same server given `--replay` with a large fixture
(`large_fixture.py`, about 6 MB), as a snapshot suite starts it (and so is the `--compare`
server); and two floors (`--no-floor` leaves them out): the interpreter
alone, spawned with `-c` to echo one line on stdout as soon as it reads one; and the stack, the
same after importing the libraries the server cannot answer without (asyncio, anyio, uvloop,
msgspec, logging, argparse, dataclasses, pathlib), and nothing of the project.
`--compare DIR` adds a third command, the server from another checkout of the repository (its
root put first on `PYTHONPATH`), so that a change is measured before and after in the same run
on a machine whose load moves from minute to minute: compare the ratios, not the milliseconds.

Every command runs with its bytecode cached, as an installed package's is (pip compiles it at
install time): the children get `PYTHONPYCACHEPREFIX` pointed at a temporary directory (and no
`PYTHONDONTWRITEBYTECODE`), so the warm-up rounds write the caches and the measured rounds read
them, without writing anything into the checkouts. `--inherit-bytecode-env` runs them in the
environment as it is instead (with `PYTHONDONTWRITEBYTECODE=1` and a source checkout, every
module of the project is compiled again in each process).

Run from the repository root: `python benchmarks/startup.py [--rounds N] [--compare DIR]`.
Human-readable lines go to stderr; stdout gets exactly one line, `STARTUP_PERF_RESULT {json}`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from large_fixture import write_large_fixture

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TIMEOUT_S = 60.0
GOAL_INITIALIZE_S = 0.120
REPLAY = "acp-server --replay"
"""The server given a large fixture (`large_fixture.py`); `compare --replay` the other one."""

INITIALIZE = {
    "protocolVersion": 1,
    "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}},
}
FLOOR_PROGRAM = "import sys; sys.stdout.write(sys.stdin.readline()); sys.stdout.flush()"
STACK_IMPORTS = "import argparse, asyncio, dataclasses, logging, pathlib, anyio, msgspec, uvloop"


def say(line: str = "") -> None:
    print(line, file=sys.stderr, flush=True)


def frame(request_id: int, method: str, params: Any) -> bytes:
    message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def read_frame(stdout: Any, name: str) -> dict[str, Any]:
    line = stdout.readline()
    if not line:
        raise RuntimeError(f"{name} closed its output before answering")
    value: dict[str, Any] = json.loads(line)
    return value


def spawn(command: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[bytes]:
    # stderr to /dev/null, not a pipe nobody reads: a chatty child would otherwise block.
    return subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=cwd,
        bufsize=0,
    )


def server_round(name: str, command: list[str], env: dict[str, str], cwd: Path) -> dict[str, float]:
    """One fresh server: seconds from spawn to the `initialize` and `session/new` answers."""
    started = time.perf_counter()
    process = spawn(command, env, cwd)
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(frame(1, "initialize", INITIALIZE))
        answer = read_frame(process.stdout, name)
        initialized = time.perf_counter()
        if answer.get("id") != 1 or "result" not in answer:
            raise RuntimeError(f"{name}: unexpected initialize answer {answer}")
        process.stdin.write(frame(2, "session/new", {"cwd": str(cwd), "mcpServers": []}))
        while True:  # a notification may come first; the answer is the frame with our id
            answer = read_frame(process.stdout, name)
            if answer.get("id") == 2 and "method" not in answer:
                break
        created = time.perf_counter()
        if "sessionId" not in answer.get("result", {}):
            raise RuntimeError(f"{name}: unexpected session/new answer {answer}")
        process.stdin.close()
        status = process.wait(timeout=TIMEOUT_S)
    except BaseException:
        process.kill()
        process.wait()
        raise
    if status != 0:
        raise RuntimeError(f"{name}: exit status {status}")
    return {"initialize": initialized - started, "session_new": created - started}


def floor_round(program: str, env: dict[str, str], cwd: Path) -> dict[str, float]:
    """Seconds from spawning `python -c program` to its echo of one line."""
    started = time.perf_counter()
    process = spawn([sys.executable, "-c", program], env, cwd)
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(frame(1, "initialize", INITIALIZE))
        if not process.stdout.readline():
            raise RuntimeError("the floor process closed its output")
        echoed = time.perf_counter()
        process.stdin.close()
        process.wait(timeout=TIMEOUT_S)
    except BaseException:
        process.kill()
        process.wait()
        raise
    return {"initialize": echoed - started}


def summary(rounds: list[dict[str, float]], key: str) -> dict[str, Any]:
    values = [r[key] for r in rounds]
    return {
        "median_s": round(statistics.median(values), 4),
        "min_s": round(min(values), 4),
        "rounds_s": [round(v, 4) for v in values],
    }


def ms(stats: dict[str, Any]) -> str:
    return f"median {stats['median_s'] * 1000:.0f} ms, min {stats['min_s'] * 1000:.0f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rounds", type=int, default=21, help="fresh processes per command (default 21)"
    )
    parser.add_argument(
        "--warmup", type=int, default=2, help="unmeasured rounds per command first (default 2)"
    )
    parser.add_argument(
        "--compare",
        type=Path,
        metavar="DIR",
        help="also time the server of the checkout at DIR, in alternating rounds",
    )
    parser.add_argument("--no-floor", action="store_true", help="leave out the interpreter floor")
    parser.add_argument(
        "--inherit-bytecode-env",
        action="store_true",
        help="leave PYTHONDONTWRITEBYTECODE and PYTHONPYCACHEPREFIX as they are",
    )
    args = parser.parse_args()
    if args.compare is not None and not (args.compare / "acp_server" / "__init__.py").is_file():
        # Otherwise the children would import whatever acp_server the environment has.
        parser.error(f"--compare {args.compare}: not a checkout of the repository")

    with tempfile.TemporaryDirectory(prefix="acp-startup-bench-") as tmp:
        root = Path(tmp)

        def environment(source: Path) -> dict[str, str]:
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(source), env.get("PYTHONPATH")]))
            if not args.inherit_bytecode_env:
                env.pop("PYTHONDONTWRITEBYTECODE", None)
                env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
            return env

        cwd = root / "workspace"
        cwd.mkdir()
        sources = {"acp-server": ROOT}
        if args.compare is not None:
            sources["compare"] = args.compare.resolve()
        # Each server also given a large fixture, as a snapshot suite starts it: neither
        # answer may wait for the fixture, which only a model call reads.
        fixture = write_large_fixture(root / "fixture")
        fixture_bytes = fixture.stat().st_size
        work: dict[str, Any] = {}
        for name, source in sources.items():
            env = environment(source)
            for label, extra in ((name, []), (f"{name} --replay", ["--replay", str(fixture)])):
                sessions = str(root / f"sessions-{label}")
                command = [
                    *[sys.executable, "-m", "acp_server", "serve", "--sessions-dir", sessions],
                    *extra,
                ]
                work[label] = lambda n=label, c=command, e=env: server_round(n, c, e, cwd)
        if not args.no_floor:
            floor_env = environment(ROOT)
            work["floor"] = lambda: floor_round(FLOOR_PROGRAM, floor_env, cwd)
            stack = f"{STACK_IMPORTS}; {FLOOR_PROGRAM}"
            work["stack"] = lambda: floor_round(stack, floor_env, cwd)
        rounds: dict[str, list[dict[str, float]]] = {name: [] for name in work}
        for _ in range(args.warmup):
            for run in work.values():
                run()
        # Rounds alternate between the commands, so that a change in the machine's load during
        # the run weighs on all of them alike.
        for _ in range(args.rounds):
            for name, run in work.items():
                rounds[name].append(run())

    result: dict[str, Any] = {
        "benchmark": "startup",
        "rounds": args.rounds,
        "bytecode_cached": not args.inherit_bytecode_env,
    }
    ours_initialize = summary(rounds["acp-server"], "initialize")
    ours_new = summary(rounds["acp-server"], "session_new")
    say(f"acp-server initialize answered: {ms(ours_initialize)}")
    say(f"acp-server session/new answered: {ms(ours_new)}")
    result["initialize"] = ours_initialize
    result["session_new"] = ours_new
    replay_initialize = summary(rounds[REPLAY], "initialize")
    replay_new = summary(rounds[REPLAY], "session_new")
    replay_ratio = replay_new["median_s"] / ours_new["median_s"]
    say(
        f"given a {fixture_bytes / 1e6:.1f} MB --replay fixture, initialize answered: {ms(replay_initialize)}"
    )
    say(f"    session/new answered: {ms(replay_new)} ({replay_ratio:.2f}x the server without it)")
    result["replay_fixture_bytes"] = fixture_bytes
    result["replay_initialize"] = replay_initialize
    result["replay_session_new"] = replay_new
    result["replay_session_new_ratio"] = round(replay_ratio, 2)
    if "compare" in rounds:
        compare_initialize = summary(rounds["compare"], "initialize")
        compare_new = summary(rounds["compare"], "session_new")
        ratio = compare_initialize["median_s"] / ours_initialize["median_s"]
        new_ratio = compare_new["median_s"] / ours_new["median_s"]
        say(f"compare ({sources['compare']}) initialize answered: {ms(compare_initialize)}")
        say(f"compare session/new answered: {ms(compare_new)}")
        say(f"    initialize: compare / acp-server = {ratio:.2f} (medians)")
        say(f"    session/new: compare / acp-server = {new_ratio:.2f} (medians)")
        result["compare_source"] = str(sources["compare"])
        result["compare_initialize"] = compare_initialize
        result["compare_session_new"] = compare_new
        result["compare_ratio"] = round(ratio, 2)
        result["compare_session_new_ratio"] = round(new_ratio, 2)
        compare_replay = summary(rounds["compare --replay"], "session_new")
        replay_compared = compare_replay["median_s"] / replay_new["median_s"]
        say(f"compare given the fixture, session/new answered: {ms(compare_replay)}")
        say(f"    session/new with the fixture: compare / acp-server = {replay_compared:.2f}")
        result["compare_replay_session_new"] = compare_replay
        result["compare_replay_session_new_ratio"] = round(replay_compared, 2)
    if "floor" in rounds:
        floor = summary(rounds["floor"], "initialize")
        say(f"interpreter floor (spawn to one echoed line): {ms(floor)}")
        result["floor"] = floor
        stack_floor = summary(rounds["stack"], "initialize")
        say(f"stack floor (the same after importing {STACK_IMPORTS[7:]}): {ms(stack_floor)}")
        result["stack_floor"] = stack_floor
    result["goal_initialize_s"] = GOAL_INITIALIZE_S
    result["goal_met"] = ours_initialize["median_s"] < GOAL_INITIALIZE_S
    result["python"] = platform.python_version()
    print("STARTUP_PERF_RESULT " + json.dumps(result, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
