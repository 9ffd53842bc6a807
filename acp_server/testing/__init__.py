"""Snapshot scenarios (SPEC 6): recorded sessions driven through the real server.

- `scenario`: the `input.json` script (msgspec types, its JSON Schema).
- `runner`: spawns `acp-server --replay DIR`, drives it from the script, answers the
  server's client requests, and returns the normalized transcript and logs.
- `normalize`: the placeholders that make a run comparable (session ids, paths, times).
- `checks`: the static checks of a scenario directory (canonical fixtures, no stray files).
- `draft`: writes a chunk-only draft fixture from a readable description of model calls.

The package is importable without pytest: a test suite wraps `run_scenario`, `compare` and
`refresh` (see `tests/test_snapshots.py` and docs/snapshots.md).
"""
