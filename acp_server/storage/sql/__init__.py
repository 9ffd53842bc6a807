"""The database engines (SPEC 2.6): SQLite and PostgreSQL, each on what `common.py` holds of
what they share (the tables' shape, a writer's queue and recovery, reading a session back).
"""
