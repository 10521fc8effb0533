"""A benchmark's result: a table to print, the same table for docs/BENCHMARKS.md, and a plot."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Report:
    name: str
    title: str
    command: str
    columns: list[str]
    rows: list[list[Any]]
    notes: list[str] = field(default_factory=list)
    aims: list[str] = field(default_factory=list)       # the targets, as constants of the benchmark
    verdicts: list[str] = field(default_factory=list)   # computed from this run's figures against the aims
    data: dict[str, Any] = field(default_factory=dict)
    plot: Callable[[Report, list], None] | None = None
    panels: int = 2

    def table(self) -> str:
        cells = [[str(c) for c in self.columns]] + [[str(c) for c in row] for row in self.rows]
        widths = [max(len(r[i]) for r in cells) for i in range(len(self.columns))]
        lines = [self.title]
        lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells]
        lines += [f"  {n}" for n in self.notes]
        lines += [f"  aim: {a}" for a in self.aims] + [f"  verdict: {v}" for v in self.verdicts]
        return "\n".join(lines)

    def markdown(self, image: str | None = None) -> str:
        out = [f"## {self.title}", "", f"`{self.command}`", "",
               "| " + " | ".join(self.columns) + " |", "|" + "---|" * len(self.columns)]
        out += ["| " + " | ".join(str(c) for c in row) + " |" for row in self.rows]
        out += [""] + [f"- {n}" for n in self.notes]
        out += [f"- aim: {a}" for a in self.aims] + [f"- **verdict: {v}**" for v in self.verdicts]
        if image:
            out += ["", f"![{self.title}]({image})"]
        return "\n".join(out) + "\n"
