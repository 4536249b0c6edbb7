"""Rich tables that fit the console's width without cutting a value: when a table is wider than the console
(a 120-column pipe, a narrow terminal), its headers wrap first, then its columns give up width widest first,
never below their longest word, so headers and notes wrap at spaces and a number, or an interval such as
``[0.807,0.932]``, stays whole. Rich's own shrinking cuts cells with an ellipsis once it runs out of room; this
never does. A table whose words alone are wider than the console is printed at the width of its words.
"""
from __future__ import annotations

from typing import List, Optional

from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.table import Table


class WrappingTable(Table):
    """A ``rich.table.Table`` whose columns are sized, when it is printed, to fit ``options.max_width``."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        widths = self.fitted_widths(console, options)
        if widths is not None:
            for column, width in zip(self.columns, widths):
                column.width, column.overflow = width, "fold"
        yield from super().__rich_console__(console, options)

    def fitted_widths(self, console: Console, options: ConsoleOptions) -> Optional[List[int]]:
        """Each column's content width (padding excluded) so the table fits; None when it fits as it is.
        Headers wrap first (down to the widest cell), then the widest cells."""
        # borders and padding as rich counts them (its private helpers: the width it will draw)
        room = options.max_width - self._extra_width - sum(self._get_padding_width(c._index) for c in self.columns)
        wide = options.update_width(10 ** 4)
        highs, cell_highs, lows = [], [], []
        for column in self.columns:
            header = [Measurement.get(console, wide, column.header)] if self.show_header else []
            cells = [Measurement.get(console, wide, cell) for cell in column.cells]
            low = max([m.minimum for m in header + cells] + [1])
            lows.append(low)
            cell_highs.append(max([m.maximum for m in cells] + [low]))
            highs.append(max([m.maximum for m in header + cells] + [1]))
        if sum(highs) <= room:
            return None
        return _shrink(_shrink(highs, cell_highs, room), lows, room)


def _shrink(widths: List[int], floors: List[int], room: int) -> List[int]:
    """``widths`` narrowed one column at a time, widest first, none below its floor, until they fit ``room``
    (or every column is at its floor)."""
    widths = list(widths)
    excess = sum(widths) - room
    while excess > 0:
        shrinkable = [i for i, (width, floor) in enumerate(zip(widths, floors)) if width > floor]
        if not shrinkable:
            break
        widest = max(widths[i] for i in shrinkable)
        for i in shrinkable:
            if widths[i] == widest and excess > 0:
                widths[i] -= 1
                excess -= 1
    return widths
