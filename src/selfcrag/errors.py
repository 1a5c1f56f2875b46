"""The one base of every error selfcrag raises, so a caller can catch them all (`except SelfcragError`). Each error
keeps its other base too (ValueError, RuntimeError, OSError, ...), for code that catches those."""

from __future__ import annotations


class SelfcragError(Exception):
    """Raised by selfcrag; its message is one line for the person who reads it."""
