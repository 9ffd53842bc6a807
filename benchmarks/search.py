"""`session.search` over the 116-turn seed session (`codec.py`'s, 417,220 events), in-process.

The session is written as `load.py --history seed` writes it, then searched cold, through the
JSONL store's `HistorySource` as the server searches a session that is not live: a word of
every message (the newest `limit` hits, which read only the newest batch), a word of no
message (the whole session read and matched: the worst case the time bound guards), and an
RE2 pattern of no message. Each figure is the best of `--repeats`; the line printed last is the
machine-readable result.

    python benchmarks/search.py [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import anyio  # noqa: E402
from load import SEED, SESSION_ID, write_seed_session  # noqa: E402

from acp_server.core.history import SearchParams, SessionAddressed  # noqa: E402
from acp_server.server.search import SEARCH_SECONDS, search  # noqa: E402
from acp_server.storage.jsonl.sessions import SessionStore  # noqa: E402
from acp_server.storage.url import open_store, parse_store_url  # noqa: E402

QUERIES = {
    "common word, limit 20": SearchParams(SessionAddressed(SESSION_ID), "the"),
    "no match, text": SearchParams(SessionAddressed(SESSION_ID), "zzyzx-not-there"),
    "no match, regex": SearchParams(SessionAddressed(SESSION_ID), r"\bq[0-9]{3}x\b", regex=True),
}


async def timed(root: Path, repeats: int) -> dict[str, dict[str, float | int]]:
    store = open_store(parse_store_url(str(root)))
    figures: dict[str, dict[str, float | int]] = {}
    try:
        for name, params in QUERIES.items():
            best = float("inf")
            hits = 0
            for _ in range(repeats):
                source = await store.history(SESSION_ID)  # cold: its index read anew
                started = time.perf_counter()
                result = await search(SESSION_ID, source, params, seconds=60.0)
                best = min(best, time.perf_counter() - started)
                hits = len(result.hits)
            figures[name] = {"ms": round(best * 1000, 1), "hits": hits}
    finally:
        await store.aclose()
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "sessions"
        write_seed_session(SessionStore(root), tmp, SEED)
        figures = anyio.run(timed, root, args.repeats)
    for name, figure in figures.items():
        print(f"{name:>24}: {figure['ms']:8.1f} ms, {figure['hits']} hits")
    print(json.dumps({"benchmark": "search", "bound_s": SEARCH_SECONDS, "queries": figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
