"""The conformance kit's clocks: how `acp-server serve` meets the time limits of `acp-tck`'s v2 suite.

The kit waits 2 s for an agent to exit once its stdin is closed, cancels a turn 0.5 s after
`running` first shows (so a turn over by then leaves its cancel rows "not exercised"), and gives
an ordinary turn 30 s. For each of `--rounds` fresh `python -m acp_server serve` processes,
after `initialize` (v2) and `session/new`, this measures, as the kit's client sees them:

- `exitMs`: from closing stdin (after `session/new`) to the process's exit;
- `hiTurnMs`: from sending the prompt "hi" to the idle that ends the turn, and its stop reason;
- `cancelPromptTurnMs`: the same for the kit's cancel prompt when nothing cancels it.

Two servers: the bare default (`bare`) and the demo recording replayed with `--pace-ms 20`
(`pacedDemo`, as docs/clients.md suggests for a kit run), where the cancel prompt is also sent
`session/cancel` 0.5 s after `running` (`cancelToIdleMs`: from that cancel to the idle, and its
stop reason).

Run from the repository root: `python benchmarks/v2_kit_timing.py [--rounds N]`. Human-readable
lines go to stderr; stdout gets exactly one line, `V2_KIT_TIMING_RESULT {json}`.
"""

from __future__ import annotations

import argparse
import json
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "acp_server" / "recordings" / "demo"
CANCEL_PROMPT = (
    "Write a very long, detailed step-by-step explanation of how a compiler works, at least "
    "2000 words."
)
INIT = {"protocolVersion": 2, "info": {"name": "acp-tck", "version": "0"}, "capabilities": {}}


class Agent:
    """One server process, spoken to with raw JSON lines as the kit does."""

    def __init__(self, sessions: Path, *flags: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "acp_server", "serve", "--sessions-dir", str(sessions), *flags],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=ROOT,
        )
        self.lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(json.loads(line))
        self.lines.put(None)

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> int:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return self.next_id

    def read(self) -> dict[str, Any]:
        message = self.lines.get(timeout=60)
        assert message is not None, "the server's stdout ended"
        return message

    def result(self, method: str, params: dict[str, Any]) -> Any:
        request_id = self.request(method, params)
        while (message := self.read()).get("id") != request_id or "method" in message:
            pass
        return message["result"]

    def turn(self, session_id: str, text: str, cancel_after: float | None = None) -> dict[str, Any]:
        """Times of one turn: to its ending idle, and (with `cancel_after`) from the cancel."""
        start = time.perf_counter()
        self.request(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
        )
        cancelled_at: float | None = None
        running_since: float | None = None
        while True:
            try:
                message = self.lines.get(timeout=0.01)
            except queue.Empty:
                message = None
            now = time.perf_counter()
            if (
                running_since is not None
                and cancel_after is not None
                and cancelled_at is None
                and now - running_since >= cancel_after
            ):
                self.send(
                    {
                        "jsonrpc": "2.0",
                        "method": "session/cancel",
                        "params": {"sessionId": session_id},
                    }
                )
                cancelled_at = now
            if message is None:
                continue
            if message.get("method") == "session/request_permission":
                option = message["params"]["options"][0]["optionId"]
                outcome = (
                    {"outcome": "cancelled"}
                    if cancelled_at
                    else {"outcome": "selected", "optionId": option}
                )
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": {"outcome": outcome}})
            update = (
                message.get("params", {}).get("update", {})
                if message.get("method") == "session/update"
                else {}
            )
            if update.get("sessionUpdate") != "state_update":
                continue
            if update["state"] == "running" and running_since is None:
                running_since = now
            if update["state"] == "idle" and "stopReason" in update:
                timing = {"turnMs": (now - start) * 1000, "stopReason": update["stopReason"]}
                if cancelled_at is not None:
                    timing["cancelToIdleMs"] = (now - cancelled_at) * 1000
                return timing

    def exit_ms(self) -> float:
        assert self.process.stdin is not None
        start = time.perf_counter()
        self.process.stdin.close()
        self.process.wait(timeout=60)
        return (time.perf_counter() - start) * 1000


def one_round(root: Path, flags: tuple[str, ...], cancel: bool) -> dict[str, Any]:
    cwd = root / "workspace"
    cwd.mkdir(exist_ok=True)
    measured: dict[str, Any] = {}
    for name, text, cancel_after in (
        ("hi", "hi", None),
        ("cancelPrompt", CANCEL_PROMPT, None),
        *([("cancelled", CANCEL_PROMPT, 0.5)] if cancel else []),
    ):
        agent = Agent(root / "sessions", *flags)
        agent.result("initialize", INIT)
        session_id = agent.result("session/new", {"cwd": str(cwd)})["sessionId"]
        measured[name] = agent.turn(session_id, text, cancel_after)
        measured.setdefault("exitMs", []).append(agent.exit_ms())
    return measured


def summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    def median(values: list[float]) -> float:
        return round(statistics.median(values), 1)

    result: dict[str, Any] = {
        "exitMs": median([ms for r in rounds for ms in r["exitMs"]]),
        "exitMsMax": round(max(ms for r in rounds for ms in r["exitMs"]), 1),
    }
    for name in ("hi", "cancelPrompt", "cancelled"):
        if name in rounds[0]:
            result[f"{name}TurnMs"] = median([r[name]["turnMs"] for r in rounds])
            result[f"{name}StopReasons"] = sorted({r[name]["stopReason"] for r in rounds})
    if "cancelled" in rounds[0]:
        result["cancelToIdleMs"] = median([r["cancelled"]["cancelToIdleMs"] for r in rounds])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, Any] = {"rounds": args.rounds}
    for name, flags, cancel in (
        ("bare", (), False),
        ("pacedDemo", ("--replay", str(DEMO), "--pace-ms", "20"), True),
    ):
        rounds = []
        for n in range(args.rounds):
            with tempfile.TemporaryDirectory() as tmp:
                rounds.append(one_round(Path(tmp), flags, cancel))
            print(f"{name} round {n + 1}: {json.dumps(rounds[-1])}", file=sys.stderr)
        results[name] = summary(rounds)
    print("V2_KIT_TIMING_RESULT " + json.dumps(results))


if __name__ == "__main__":
    main()
