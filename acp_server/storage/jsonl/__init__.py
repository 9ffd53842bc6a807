"""The JSONL engine (SPEC 2.2 to 2.5): a directory of session logs, one file each.

`store.py` is the store API over it; `sessions.py` the sessions root; `lines.py`, `log.py` and
`writer.py` one log file's lines, reading and writing; `index.py` (with `readers.py`) the history
index that reads a log backwards, as far as a page needs.
"""
