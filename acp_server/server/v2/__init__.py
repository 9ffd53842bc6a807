"""ACP v2 (Preview) beside v1: the methods and shapes of a connection whose `initialize`
agreed on protocol version 2, over the same session registry, logs and stores as v1's."""
