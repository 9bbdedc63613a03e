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


def show(value: object, digits: int = 3, style: str = "f") -> str:
    """A value as a table cell: ``n/a`` for None, floats to `digits`, lists in brackets.

    Args:
        value: The value; anything but a float, a list or None is shown with ``str``.
        digits: Decimals (``f``) or significant digits (``g``) of a float.
        style: The float presentation type: ``f`` (fixed point) or ``g`` (general).

    Example:
        >>> show(2 / 3), show(None), show([0.5, 1.25], 2), show(12345.678, 4, "g")
        ('0.667', 'n/a', '[0.50, 1.25]', '1.235e+04')
    """
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.{digits}{style}}"
    if isinstance(value, list):
        return "[" + ", ".join(show(v, digits, style) for v in value) + "]"
    return str(value)
