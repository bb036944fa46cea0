"""A small project of our own written in the idioms real kernel libraries use (tests/pyeval)."""
