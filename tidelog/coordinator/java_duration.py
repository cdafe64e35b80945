"""java.time.Duration texts (PnDTnHnMn.nS), as share.auto.offset.reset=by_duration:<duration> takes them: a leaf
module, shared by the group configs (which validate the value) and the share coordinator (which applies it)."""

from __future__ import annotations

import re
from decimal import Decimal

# java.time.Duration.parse's grammar (PnDTnHnMn.nS)
DURATION = re.compile(r"([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?"
                      r"(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?", re.IGNORECASE)


def duration_ms(text: str) -> int:
    """A java.time.Duration text in milliseconds (the value was checked when it was set)."""
    match = DURATION.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"not a duration: {text}")
    seconds = Decimal(f"{match.group(6) or 0}.{match.group(7) or 0}")
    total = int(match.group(2) or 0) * 86400 + int(match.group(4) or 0) * 3600 + int(match.group(5) or 0) * 60 + seconds
    return int((-total if match.group(1) == "-" else total) * 1000)
