"""acp-server: an Agent Client Protocol agent over stdio with event-sourced session logs."""

__version__ = "0.1.0"
