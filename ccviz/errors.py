"""One exception type for every user-facing mistake.

Front ends (CLI, app) catch ``CcvizError`` and show its message as is, so the
message must name the offending field and say how to fix it.
"""

from __future__ import annotations


class CcvizError(ValueError):
    """A bad input or an impossible request, with a message meant for the user."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field
