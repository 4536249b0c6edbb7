"""Rich tables that fit the console's width without cutting a value: when a table is wider than the console
(a 120-column pipe, a narrow terminal), its columns give up width widest first, never below their longest
word, so headers and notes wrap at spaces and a number, or an interval such as ``[0.807,0.932]``, stays whole.
Rich's own shrinking cuts cells with an ellipsis once it runs out of room; this never does. A table whose
words alone are wider than the console is printed at the width of its words.
"""
from __future__ import annotations

from typing import List

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

    def fitted_widths(self, console: Console, options: ConsoleOptions) -> "List[int] | None":
        """Each column's content width (padding excluded) so the table fits; None when it fits as it is."""
        room = options.max_width - self._extra_width
        pad = [self._get_padding_width(column._index) for column in self.columns]
        lows, highs = [], []
        for column in self.columns:
            cells = ([column.header] if self.show_header else []) + list(column.cells)
            sizes = [Measurement.get(console, options.update_width(10 ** 4), cell) for cell in cells] or [
                Measurement(1, 1)]
            lows.append(max(max(size.minimum for size in sizes), 1))
            highs.append(max(max(size.maximum for size in sizes), 1))
        if sum(highs) + sum(pad) <= room:
            return None
        widths = list(highs)
        excess = sum(widths) + sum(pad) - room
        while excess > 0:
            shrinkable = [i for i, (w, low) in enumerate(zip(widths, lows)) if w > low]
            if not shrinkable:
                break
            widest = max(widths[i] for i in shrinkable)
            for i in shrinkable:
                if widths[i] == widest and excess > 0:
                    widths[i] -= 1
                    excess -= 1
        return widths
