"""What a terminal shows for a program's output: the lines as a person reads them, for the tests of the
progress line (the unit test's fake terminal and the e2e test's real pseudo-terminal)."""

from __future__ import annotations

import re


def screen(raw: str) -> list[str]:
    """The lines a terminal shows for `raw`: `\\r` moves the cursor to the line's start, ESC[K erases from the
    cursor to the line's end, text overwrites from the cursor; `\\r\\n` (a pty's newline) ends a line."""
    lines: list[str] = []
    line: list[str] = []
    col = 0
    for piece in re.split(r"(\r\n|\r|\n|\x1b\[K)", raw):
        if piece in ("\n", "\r\n"):
            lines.append("".join(line))
            line, col = [], 0
        elif piece == "\r":
            col = 0
        elif piece == "\x1b[K":
            del line[col:]
        elif piece:
            for ch in piece:
                if col < len(line):
                    line[col] = ch
                else:
                    line.append(ch)
                col += 1
    if line:
        lines.append("".join(line))
    return lines
