"""The I/O layer for session logs: log files on disk and the sessions root around them."""
