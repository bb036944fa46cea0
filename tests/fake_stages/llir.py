"""Fake llir stage (tests/fake_stages/lowering.py)."""

from .lowering import lower

VERSION = 1


def run(inputs, options):
    return lower("llir", inputs, options)
