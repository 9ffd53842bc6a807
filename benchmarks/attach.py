"""`acp-server attach` against plain `serve`: from the spawn to the last update of `session/load`.

Builds `load.py`'s `--history seed` session (`codec.py`'s 116 turns, 417,220 events) with its
builders, then in alternating rounds spawns, as an editor spawns its agent, and loads it with
`load.py`'s client (`load_once`: `initialize`, one request only a started server answers, then
`session/load`, every replayed message checked):

(a) `python -m acp_server attach --sessions-dir D` with the user's shared server already running
    (warm): the relay imports next to nothing and passes the bytes through;
(b) the same, the first attach that starts the server (the server stopped before the round with
    `attach --stop`): counted separately;
(c) plain `python -m acp_server serve --sessions-dir D`, a fresh process each round.

The servers' sockets and state live under the run's temporary directory (`XDG_RUNTIME_DIR`,
`XDG_STATE_HOME`), and every command runs with its bytecode cached, as an installed package's is
(`load.py`'s note). The judged target: a warm attach at least 3x faster than codex-acp's ~260 ms
on the same history, i.e. under ~87 ms.

Run from the repository root: `python benchmarks/attach.py [--rounds N]`. Human-readable lines go
to stderr; stdout gets exactly one line, `ATTACH_PERF_RESULT {json}`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from load import (
    HERE,
    SEED,
    SessionStore,
    expected_replay,
    load_once,
    say,
    write_seed_session,
)

PEER_S = 0.260
"""codex-acp, the fastest peer, from the spawn to the last update of the same load."""
GOAL_RATIO = 3.0


def run(rounds: int, root: Path) -> int:
    workspace = root / "workspace"
    workspace.mkdir()
    sessions = root / "sessions"
    _, shown = write_seed_session(SessionStore(sessions), str(workspace), SEED)
    expected = expected_replay(shown)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE.parent), env.get("PYTHONPATH")]))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
    env["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="acp-attach-")  # a short socket path
    env["XDG_STATE_HOME"] = str(root / "state")
    flags = ["--sessions-dir", str(sessions)]
    program = [sys.executable, "-m", "acp_server"]
    attach, serve = [*program, "attach", *flags], [*program, "serve", *flags]

    def stop() -> None:
        subprocess.run([*program, "attach", "--stop"], env=env, check=True, timeout=120)

    measured: dict[str, list[dict[str, Any]]] = {"attach": [], "first attach": [], "serve": []}
    try:
        for number in range(rounds + 1):  # the first round is a warm-up
            stop()
            results = {
                "first attach": load_once("first attach", attach, env, str(workspace), root / "e"),
                "attach": load_once("attach", attach, env, str(workspace), root / "e"),
                "serve": load_once("serve", serve, env, str(workspace), root / "e"),
            }
            for name, result in results.items():
                if result.pop("params") != expected:
                    raise RuntimeError(f"{name} did not replay the session's messages in order")
                if number:
                    measured[name].append(result)
    finally:
        stop()
        shutil.rmtree(env["XDG_RUNTIME_DIR"], ignore_errors=True)

    def median_ms(name: str) -> float:
        return statistics.median(r["spawn_to_last_update_s"] for r in measured[name]) * 1000

    def rounds_ms(name: str) -> str:
        return ", ".join(f"{r['spawn_to_last_update_s'] * 1000:.0f}" for r in measured[name])

    warm, first, plain = median_ms("attach"), median_ms("first attach"), median_ms("serve")
    say(f"from the spawn to the last update of session/load ({rounds} rounds, medians):")
    say(f"(a) attach, warm server:   {warm:.0f} ms (rounds {rounds_ms('attach')})")
    say(
        f"(b) attach, first (starts the server): {first:.0f} ms (rounds {rounds_ms('first attach')})"
    )
    say(f"(c) serve:                 {plain:.0f} ms (rounds {rounds_ms('serve')})")
    ratio = PEER_S * 1000 / warm
    say(
        f"    warm attach is {plain / warm:.2f}x faster than serve, {ratio:.2f}x faster than "
        f"codex-acp's {PEER_S * 1000:.0f} ms (goal {GOAL_RATIO:g}x: under "
        f"{PEER_S * 1000 / GOAL_RATIO:.0f} ms)"
    )
    result = {
        "benchmark": "attach",
        "history": "seed",
        "rounds": rounds,
        "attach_warm_s": round(warm / 1000, 4),
        "attach_warm_rounds_s": [round(r["spawn_to_last_update_s"], 4) for r in measured["attach"]],
        "attach_first_s": round(first / 1000, 4),
        "attach_first_rounds_s": [
            round(r["spawn_to_last_update_s"], 4) for r in measured["first attach"]
        ],
        "serve_s": round(plain / 1000, 4),
        "serve_rounds_s": [round(r["spawn_to_last_update_s"], 4) for r in measured["serve"]],
        "notifications": measured["attach"][0]["notifications"],
        "ratio_peer": round(ratio, 2),
        "goal_ratio": GOAL_RATIO,
        "met": ratio >= GOAL_RATIO,
        "load_average": os.getloadavg()[0],
        "python": platform.python_version(),
    }
    print("ATTACH_PERF_RESULT " + json.dumps(result), flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rounds", type=int, default=5, help="rounds of each, alternating (default 5)"
    )
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="acp-attach-bench-"))
    try:
        return run(args.rounds, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
