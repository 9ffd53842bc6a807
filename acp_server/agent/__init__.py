"""The agent: the loop that runs turns and steps, its tools, and the live session state."""
