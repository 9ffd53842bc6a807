"""The sans-I/O core: data types and pure functions over them.

Nothing in this package touches files, pipes, clocks or processes. The storage layer
(`acp_server.storage`) and the server (`acp_server.server`) wrap it.
"""
