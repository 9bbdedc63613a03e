"""Answering debatable questions (DebateQA): plain, vanilla RAG and ReAct RAG prompts.

The prompts are in ``prompts/debateqa/``: three system prompts (``basic``, ``comprehensive``,
``detailed``; the paper's Table 18), the RAG system and user prompts (Table 17), and the ReAct
system prompt and observation turns. ReAct
replies are read with `parse_react_step`: a ``Search:`` line asks for documents, a
``Final Answer:`` ends the loop, and a reply with neither is the final answer (as a tool-calling
agent ends on a message without a tool call).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from moot.prompts import render

#: The ``--prompt`` choices: DebateQA's three system prompts.
PROMPTS: tuple[str, ...] = ("basic", "comprehensive", "detailed")

Messages = list[dict[str, Any]]

_FINAL = re.compile(r"\**final\s+answer\**\s*:\**\s*", re.I)
_SEARCH = re.compile(
    r"^\s*\**(?:action\s*:\s*)?search\s*(?::|\[)\**\s*(.+?)\s*\]?\s*$", re.I | re.M
)
_THOUGHT = re.compile(r"^\s*\**thought\**\s*:\s*", re.I)


def system_prompt(prompt: str) -> str:
    """The system prompt ``basic``, ``comprehensive`` or ``detailed``."""
    return render(f"debateqa/answer_{prompt}.j2")


def plain_messages(question: str, prompt: str) -> Messages:
    """The request of plain answering: a system prompt and the question."""
    return [
        {"role": "system", "content": system_prompt(prompt)},
        {"role": "user", "content": question},
    ]


def rag_messages(question: str, hits: Sequence[dict[str, Any]], prompt: str) -> Messages:
    """The request of RAG (vanilla and ReAct): DebateQA Table 17's system and user turns.

    With ``basic`` the system turn is Table 17's; with ``comprehensive`` or ``detailed`` it is
    that Table 18 prompt (the paper is silent on RAG with them).

    Args:
        question: The question.
        hits: Retrieved chunks as JSON records (``text``, ``title`` ...), best first.
        prompt: ``basic``, ``comprehensive`` or ``detailed``.
    """
    system = render("debateqa/rag_system.j2") if prompt == "basic" else system_prompt(prompt)
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": render("debateqa/rag.j2", question=question, chunks=hits)},
    ]


@dataclass(frozen=True)
class ReactStep:
    """One ReAct reply: its thought, and either a search query or the final answer."""

    thought: str
    query: str | None = None
    answer: str | None = None


def parse_react_step(text: str) -> ReactStep:
    """Read a ReAct reply.

    A ``Final Answer:`` wins over a ``Search:`` line in the same reply (the agent is done); a
    reply with neither is taken whole as the final answer.

    Example:
        >>> parse_react_step("Thought: enough.  Final Answer: It depends.").answer
        'It depends.'
    """
    final = _FINAL.search(text)
    search = None if final else _SEARCH.search(text)
    end = final.start() if final else search.start() if search else len(text)
    thought = _THOUGHT.sub("", text[:end], count=1).strip()
    if final:
        return ReactStep(thought, answer=text[final.end() :].strip())
    if search and search.group(1).strip():
        return ReactStep(thought, query=search.group(1).strip().strip('"'))
    return ReactStep("", answer=text.strip())


def react_messages(
    question: str, trace: Sequence[dict[str, Any]], prompt: str, max_searches: int, search_k: int
) -> Messages:
    """The ReAct request after `trace`: searches (with their observation) and agent replies.

    The first search, run on the question itself, is shown with the question; each later reply
    is an assistant turn and the observation of the search it asked for a user turn.
    """
    system = render(
        "debateqa/react_system.j2", prompt=prompt, max_searches=max_searches, search_k=search_k
    )
    searches = [event for event in trace if event["kind"] == "search"]
    first = render(
        "debateqa/react_question.j2", question=question, observation=searches[0]["observation"]
    )
    messages: Messages = [
        {"role": "system", "content": system},
        {"role": "user", "content": first},
    ]
    for event in trace[1:]:
        if event["kind"] == "search":
            messages.append({"role": "user", "content": event["observation"]})
        else:
            messages.append({"role": "assistant", "content": event["reply"]})
    return messages


def observation(query: str, hits: Sequence[dict[str, Any]], search: int, max_searches: int) -> str:
    """The text showing the agent what search number `search` (1-based) returned."""
    return render(
        "debateqa/react_observation.j2",
        query=query,
        hits=hits,
        search=search,
        max_searches=max_searches,
    )
