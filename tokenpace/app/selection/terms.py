"""What selection gives back that a view shows (a candidate's cost, a scenario's prices): the CLI reads
them here, so that it imports the app only."""

from __future__ import annotations

from tokenpace.core.analysis.selection.cost import Cost
from tokenpace.core.analysis.selection.scenarios import Prices

__all__ = ["Cost", "Prices"]
