"""What scrubbing every held key costs a tool call: `HeldKeys` over a credentials file of
three keys (two providers, one other API root) and two provider key variables, in process.

- `unchanged`: `secrets_now()` when the file has not changed (one `stat`, the variables read);
- `changed`: `secrets_now()` right after the file was rewritten (read and decoded again);
- `awaited`: `await secrets()`, as the loop calls it once per tool result (the thread hop);
- `scrub_64k`: one 64 KiB command output (the kept tail's size) scrubbed of the provider's key
  alone, and of every held key (the provider's among them), as `ToolCalls._scrubbed` does.

Medians over `--rounds` calls. Human-readable lines go to stderr; stdout gets exactly one line,
`HELD_KEYS_RESULT {json}`.

Run from the repository root: `python benchmarks/held_keys.py [--rounds N]`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import anyio

from acp_server.providers.credentials import KeyName, store_key
from acp_server.providers.held_keys import HeldKeys
from acp_server.providers.secret import Secret

PROVIDER_KEY = "sk-9f3Qz7LmXw2Vb8Np4Rt6Yh1Kd5Gs0JcUe"
VARIABLES = frozenset({"ACP_BENCH_KEY_A", "ACP_BENCH_KEY_B"})


def median_ns(call: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter_ns()
        call()
        times.append(time.perf_counter_ns() - started)
    return statistics.median(times)


def scrub(text: str, keys: list[Secret]) -> str:
    for key in keys:
        text = key.scrub(text)
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2000, help="calls measured (2000)")
    args = parser.parse_args()
    rounds = args.rounds
    os.environ["ACP_BENCH_KEY_A"] = "sk-ant-Zq8Lw3Xv5Bn7Mk1Pj9Hd2Gf4Sc6Ty0Ru"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "credentials.json"
        store_key(Secret(PROVIDER_KEY), KeyName("openai"), path)
        store_key(Secret("sk-ant-Zq8Lw3Xv5Bn7Mk1Pj9Hd2Gf4Sc6Ty0Ru"), KeyName("anthropic"), path)
        store_key(
            Secret("gw-Hc4Tn8Rb2Wq6Ym0Kz3Vx7Ls1Pd5Fj9"), KeyName("openai", "https://g/v1"), path
        )
        held = HeldKeys(path, VARIABLES)
        held.secrets_now()
        unchanged = median_ns(held.secrets_now, rounds)

        def rewritten() -> None:
            os.utime(path, ns=(time.time_ns(), time.time_ns()))
            held.secrets_now()

        changed = median_ns(rewritten, rounds // 10 or 1)

        async def awaited_all() -> list[int]:
            times = []
            for _ in range(rounds):
                started = time.perf_counter_ns()
                await held.secrets()
                times.append(time.perf_counter_ns() - started)
            return times

        awaited = statistics.median(anyio.run(awaited_all))
        output = ("x" * 79 + "\n") * (64 * 1024 // 80)
        own = [Secret(PROVIDER_KEY)]
        every = list(held.secrets_now())  # the provider's key is one of the stored
        alone = median_ns(lambda: scrub(output, own), rounds // 10 or 1)
        all_keys = median_ns(lambda: scrub(output, every), rounds // 10 or 1)
    result = {
        "rounds": rounds,
        "held": len(every),
        "unchanged_us": round(unchanged / 1000, 1),
        "changed_us": round(changed / 1000, 1),
        "awaited_us": round(awaited / 1000, 1),
        "scrub_64k_own_us": round(alone / 1000, 1),
        "scrub_64k_all_us": round(all_keys / 1000, 1),
    }
    for name, value in result.items():
        print(f"{name}: {value}", file=sys.stderr)
    print("HELD_KEYS_RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
