"""The one table renderer: aligned plain text for terminals, Markdown for report files."""

from __future__ import annotations

from collections.abc import Sequence


def render_table(rows: Sequence[Sequence[object]], *, left: int = 1, markdown: bool = False) -> str:
    """Render `rows` (the first is the header) as a table, without a trailing newline.

    Args:
        rows: The header, then the data rows; cells are shown with ``str``.
        left: How many leading columns are left-aligned; the others are right-aligned
            (numbers).
        markdown: A Markdown table (``| a | b |`` rows, ``---`` / ``---:`` alignment marks,
            ``|`` escaped and newlines folded in cells); else plain text, columns padded to
            their widest cell and two spaces apart.

    Example:
        >>> print(render_table([("model", "calls"), ("gpt-4o", 12)]))
        model   calls
        gpt-4o     12
        >>> print(render_table([("model", "calls"), ("gpt-4o", 12)], markdown=True))
        | model | calls |
        | --- | ---: |
        | gpt-4o | 12 |
    """
    cells = [[str(cell) for cell in row] for row in rows]
    if markdown:
        cells = [[c.replace("|", "\\|").replace("\n", " ") for c in row] for row in cells]
        marks = ["---" if i < left else "---:" for i in range(len(cells[0]))]
        return "\n".join(f"| {' | '.join(row)} |" for row in [cells[0], marks, *cells[1:]])
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    lines = []
    for row in cells:
        padded = [
            c.ljust(w) if i < left else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(padded).rstrip())
    return "\n".join(lines)
