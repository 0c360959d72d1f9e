"""Multi-turn sessions: each session's turns are sent one after another, each with the whole chat
so far (earlier prompts and the assistant's answers), after a think time. Pure: the plan of turns;
the app sends them and keeps the answers."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

from tokenpace.core.workload.item import WorkItem, Workload


@dataclass
class SessionWorkload:
    """Sessions of ``turns`` user turns. A dataset of conversations (ShareGPT) gives each session
    the human turns of one conversation; any other workload gives ``turns`` successive prompts."""

    source: Workload
    turns: int
    think_time_s: float = 0.0

    def sessions(self) -> Iterator[list[WorkItem]]:
        if getattr(self.source, "multi_turn", False):
            yield from self.source.conversations(self.turns)  # type: ignore[attr-defined]
            return
        items = self.source.items()
        while True:
            group = list(islice(items, self.turns))
            if not group:
                return
            yield group

    def items(self) -> Iterator[WorkItem]:
        return iter(())  # sent by the session runner, turn by turn

    def describe(self) -> dict[str, Any]:
        out = dict(self.source.describe())
        out["sessions"] = {
            "turns": self.turns,
            "think_time_s": self.think_time_s,
            "history": "each turn sends every earlier prompt and the answer the server streamed",
        }
        return out


def history_messages(history: list[dict[str, str]], item: WorkItem) -> list[dict[str, str]]:
    """The messages of one turn: the chat so far, then this turn's user message."""
    return [*history, *(item.messages or [{"role": "user", "content": item.prompt}])]
