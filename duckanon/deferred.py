"""pandas, loaded only when a DataFrame is asked for.

Loading pandas (with the pyarrow it loads) and unloading it at exit costs about a quarter of the README's main command,
which builds no DataFrame.  Modules name it as usual (``pd.DataFrame``) through :data:`pandas`, imported on the first
attribute read; small results are kept as :class:`Rows` and framed on request; :func:`is_missing` tells a missing
value without pandas.
"""

from __future__ import annotations

import importlib
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType


class DeferredModule:
    """Stands for the module ``name``, importing it on the first attribute read."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attribute: str):
        module: ModuleType = importlib.import_module(self._name)
        return getattr(module, attribute)

    def __repr__(self) -> str:
        return f"<deferred module {self._name!r}>"


pandas = DeferredModule("pandas")


def is_missing(value: object) -> bool:
    """None, a float NaN, or pandas' NA or NaT; pandas is looked at only once loaded, as no value can be its NA before."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return True
    loaded = sys.modules.get("pandas")
    return loaded is not None and (value is loaded.NA or value is loaded.NaT)


@dataclass(frozen=True)
class Rows:
    """A small result: its column names and rows, as a pandas DataFrame (:meth:`frame`) only when asked."""

    columns: tuple[str, ...]
    rows: tuple[tuple, ...]

    def __len__(self) -> int:
        return len(self.rows)

    def frame(self):
        """The rows as a DataFrame, each column of the dtype pandas infers from its values."""
        return pandas.DataFrame.from_records(list(self.rows), columns=list(self.columns))

    def records(self) -> list[dict[str, object]]:
        return [dict(zip(self.columns, row)) for row in self.rows]

    def mapped(self, column: str, values: Mapping[object, object]) -> Rows:
        """These rows with ``column``'s values replaced by what ``values`` maps them to (None where it maps none)."""
        at = self.columns.index(column)
        return Rows(self.columns, tuple((*row[:at], values.get(row[at]), *row[at + 1:]) for row in self.rows))

    def text(self) -> str:
        """The rows as aligned text, every column right-aligned under its name (as ``DataFrame.to_string`` without
        the index)."""
        cells = [list(self.columns), *[[str(value) for value in row] for row in self.rows]]
        widths = [max(len(line[i]) for line in cells) for i in range(len(self.columns))]
        return "\n".join("  ".join(cell.rjust(width) for cell, width in zip(line, widths)) for line in cells)
