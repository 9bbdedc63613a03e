"""A readable report of one judgment, in Markdown or HTML.

The report is built once as a list of blocks (heading, paragraph, table, quote) and rendered to
either format, so both always say the same thing.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from moot.core.data.debates import Debate
from moot.core.data.records import atomic_write, safe_name
from moot.core.tables import render_table

Block = tuple[str, Any]  # ("h1"|"h2"|"h3", text) | ("p", text) | ("quote", text) | ("table", rows)


def report_blocks(record: dict[str, Any], debate: Debate) -> list[Block]:
    """The content of a judgment's report."""
    blocks: list[Block] = [
        ("h1", f"{debate.id}: {debate.motion}"),
        (
            "p",
            f"Pro: {', '.join(debate.pro)} · Con: {', '.join(debate.con)} · "
            f"{len(debate.speeches)} speeches · framework {record['framework']} · "
            f"judge {record['judge']} · repeat {record['repeat']}",
        ),
    ]
    if record["status"] != "complete":
        blocks.append(("p", f"Status: {record['status']}: {record['reason']}"))
        return blocks
    final = record["final"]
    blocks += [("h2", f"Verdict: {_winner(final, debate)}"), _score_table(final)]
    if len(record["dimensions"]) > 1:
        blocks += [("h3", "Panel judgment"), ("quote", final["judgment"])]
    for name, verdict in record["dimensions"].items():
        blocks += [
            (
                "h2",
                f"{name.capitalize()} (weight {verdict['weight']:g}): {_winner(verdict, debate)}",
            ),
            _score_table(verdict),
            ("quote", verdict["judgment"]),
        ]
        if verdict["speeches"]:
            rows = [["#", "speaker", "score", "comment"]]
            for speech in verdict["speeches"]:
                score, comment = _score(speech)
                rows.append([str(speech["index"] + 1), speech["speaker"], score, comment])
            blocks += [("h3", "Speech by speech"), ("table", rows)]
        for summary in verdict["summaries"]:
            blocks += [("h3", "Memory summary (the analyses no longer fitted)"), ("quote", summary)]
    usage = record.get("usage", {})
    blocks.append(
        (
            "p",
            f"{usage.get('calls', 0)} calls, {usage.get('prompt_tokens', 0)} prompt tokens, "
            f"largest prompt {usage.get('largest_prompt', 0)} tokens.",
        )
    )
    return blocks


def _winner(verdict: dict[str, Any], debate: Debate) -> str:
    winner = verdict["winner"]
    if winner is None:
        return f"unparsed ({verdict['winner_failure']['error']})"
    return "tie" if winner == "tie" else f"{winner} ({debate.side(winner)})"


def _score(entry: dict[str, Any]) -> tuple[str, str]:
    if "parse_failure" in entry:
        return "unparsed", entry["parse_failure"]["error"]
    return str(entry["score"]), entry.get("comment", "")  # a speech's comment is its analysis


def _score_table(verdict: dict[str, Any]) -> Block:
    rows = [["debater", "score", "comment"]]
    rows += [[name, *_score(entry)] for name, entry in verdict["debaters"].items()]
    return ("table", rows)


def to_markdown(blocks: list[Block]) -> str:
    """Render blocks as Markdown."""
    out = []
    for kind, value in blocks:
        if kind.startswith("h"):
            out.append("#" * int(kind[1]) + " " + value)
        elif kind == "quote":
            out.append("\n".join("> " + line for line in value.splitlines() or [""]))
        elif kind == "table":
            out.append(render_table(value, markdown=True, left=len(value[0])))
        else:
            out.append(value)
    return "\n\n".join(out) + "\n"


def to_html(blocks: list[Block]) -> str:
    """Render blocks as a standalone HTML page."""
    body = []
    for kind, value in blocks:
        if kind.startswith("h"):
            body.append(f"<{kind}>{html.escape(value)}</{kind}>")
        elif kind == "quote":
            body.append(f"<blockquote>{html.escape(value)}</blockquote>")
        elif kind == "table":
            head = "".join(f"<th>{html.escape(c)}</th>" for c in value[0])
            rows = "".join(
                "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
                for row in value[1:]
            )
            body.append(f"<table><tr>{head}</tr>{rows}</table>")
        else:
            body.append(f"<p>{html.escape(value)}</p>")
    style = (
        "body{font-family:sans-serif;max-width:60em;margin:auto}"
        "blockquote{white-space:pre-wrap;border-left:3px solid #ccc;padding-left:1em}"
        "td,th{border:1px solid #ccc;padding:.2em .5em;vertical-align:top}"
        "table{border-collapse:collapse}"
    )
    title = html.escape(blocks[0][1])
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>"
        f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n"
    )


def write_report(record: dict[str, Any], debate: Debate, folder: Path, fmt: str = "md") -> Path:
    """Write ``<folder>/<debate>.r<repeat>.<fmt>`` for one judgment and return its path.

    The debate id is percent-encoded in the name (``a/b`` -> ``a%2Fb``), so every id gets its
    own file inside `folder`, whatever characters it holds; an id too long for a file name is
    cut and ends in a hash of the whole id (`moot.core.data.records.safe_name`).
    """
    blocks = report_blocks(record, debate)
    text = to_html(blocks) if fmt == "html" else to_markdown(blocks)
    path = Path(folder) / safe_name(debate.id, f".r{record['repeat']}.{fmt}")
    atomic_write(path, lambda f: f.write(text))
    return path
