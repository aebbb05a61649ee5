"""Two runs side by side (docs/compare.md): the page `runs:run-compare` and the API's
`GET /api/v1/runs/compare` show the same dict, `run_compare(a, b)`.

Reads are bounded: whatever the runs' sizes, a compare makes a constant number of queries
(the two runs' input messages, their step messages, tool calls and tickets: one query
each, for both runs at once where the rows allow), each capped at a number of rows."""

from __future__ import annotations

import difflib
import re
from typing import Any

from django.db.models import Q

from runs.models import Decision, Message, Run, Ticket, ToolCall
from runs.replays.selectors.compare_summary import run_head, run_summary

# The newest messages of a run's input shown (a long thread's history is left out).
INPUT_SHOWN = 20
# Steps compared (0 … MAX_STEPS-1); the rows each run may bring are capped likewise.
MAX_STEPS = 100
MAX_STEP_MESSAGES = 1000  # per run
MAX_TOOL_CALLS = 500  # both runs together
MAX_TICKETS = 200  # both runs together
DIFF_TEXT_CHARS = 20_000  # longer texts are marked different without a word diff

WORDS = re.compile(r"\s+|[^\s]+")


def run_compare(a: Run, b: Run) -> dict[str, Any]:
    """Runs `a` and `b` (with their agent and agent_version) compared; JSON-safe.

    The alignment: row `input` holds the messages each run started with (its input range
    of the thread's log, the newest INPUT_SHOWN of them); then one row per step index
    0 … max(a.steps, b.steps) - 1 (at most MAX_STEPS), holding the messages each run
    produced at that step (`Message.step_index`: its assistant message, its tool results)
    and its tool calls (`ToolCall.step_index`), with their tickets. A message the run did
    not produce that arrived during the run (steering input) joins the step after the
    last one produced before it. A side is null when that run has no such step.

    A fork compared with the run it was forked from (either side) is aligned with it: the
    fork's copy of the original's conversation up to its `fork_step` k fills the fork's
    side of the input row and of steps 0 … k-1 (rows marked `copied`, with the original's
    tool calls and the copied results: only an edit made by the fork differs there), and
    the fork's own step i is row k + i, beside the original's step k + i.

    A row is `different` when the two sides' assistant texts differ (`text_different`,
    with a word-level `text_diff`) or their tool calls differ: name, arguments, status
    and result, in order (`tools_different`). Call ids are not compared."""
    same = a.pk == b.pk
    pair = None if same else _fork_pair(a, b)
    ranges: dict[Any, tuple[int, int] | None] = {}
    if pair is not None:  # the fork's input row: its copy of the original's input
        original, fork, _ = pair
        ranges[fork.pk] = _input_range(original)
    inputs = _input_messages([a] if same else [a, b], ranges)
    produced = _step_messages([a] if same else [a, b], pair)
    calls = _tool_calls([a.pk] if same else [a.pk, b.pk])
    tickets = _tickets([a.pk] if same else [a.pk, b.pk])
    step_calls = {run.pk: [(c.step_index or 0, c, False) for c in calls[run.pk]] for run in (a, b)}
    if pair is not None:
        _align_fork(pair, produced, step_calls)
    sides = {}
    for run in (a, b):
        sides[run.pk] = _side(run, inputs[run.pk], produced[run.pk], step_calls[run.pk], tickets)
    side_a, side_b = sides[a.pk], sides[b.pk]
    rows, spans = _step_rows(a, b, side_a, side_b, pair)
    return {
        "same_run": same,
        "a": run_head(a),
        "b": run_head(b),
        "fork": None
        if pair is None
        else {"original": str(pair[0].pk), "fork": str(pair[1].pk), "step": pair[2]},
        "summary": run_summary(a, b),
        "steps": rows,
        "steps_truncated": max(spans[:2]) > MAX_STEPS or side_a["truncated"] or side_b["truncated"],
        "different_steps": [row["step"] for row in rows if row["different"]],
        "tickets": _ticket_rows(side_a["tickets"], side_b["tickets"]),
        "tickets_truncated": tickets["truncated"],
    }


def _step_rows(
    a: Run, b: Run, side_a: dict[str, Any], side_b: dict[str, Any], pair: Any
) -> tuple[list[dict[str, Any]], list[int]]:
    """The input row, then one row per step index up to the longer run (at most
    MAX_STEPS), a fork's steps shifted by its fork step; and the spans they were cut from."""
    shift = {run.pk: 0 for run in (a, b)}
    if pair is not None:
        shift[pair[1].pk] = pair[2]
    spans = [run.steps + shift[run.pk] for run in (a, b)]
    spans += [max(side["steps"], default=-1) + 1 for side in (side_a, side_b)]
    count = min(max(spans), MAX_STEPS)
    copied = pair[2] if pair is not None else 0
    rows = [{**_row(None, side_a["input"], side_b["input"]), "copied": False}]
    for index in range(count):
        row = _row(index, side_a["steps"].get(index), side_b["steps"].get(index))
        row["copied"] = index < copied
        rows.append(row)
    return rows, spans


# --- reads ---------------------------------------------------------------------------------


def _input_range(run: Run) -> tuple[int, int] | None:
    part = run.input if isinstance(run.input, dict) else {}
    seqs = part.get("range") if isinstance(part.get("range"), dict) else None
    if not seqs:
        return None
    return int(seqs["from_seq"]), int(seqs["to_seq"])


def _output_end(run: Run) -> int:
    part = run.output if isinstance(run.output, dict) else {}
    seqs = part.get("range") if isinstance(part.get("range"), dict) else None
    return int(seqs["to_seq"]) if seqs else 0


MESSAGE_FIELDS = ("thread_id", "seq", "role", "content", "tool_call_id", "produced_by_run_id")


def _input_messages(
    runs: list[Run], ranges: dict[Any, tuple[int, int] | None]
) -> dict[Any, dict[str, Any]]:
    """Each run's input messages (its input range, or the one `ranges` gives), the newest
    INPUT_SHOWN: one query for all runs."""
    found: dict[Any, dict[str, Any]] = {}
    query: Any = None

    def seqs_of(run: Run) -> tuple[int, int] | None:
        return ranges[run.pk] if run.pk in ranges else _input_range(run)

    for run in runs:
        seqs = seqs_of(run)
        found[run.pk] = {"messages": [], "total": 0 if seqs is None else seqs[1] - seqs[0] + 1}
        if seqs is None:
            continue
        start = max(seqs[0], seqs[1] - INPUT_SHOWN + 1)
        part = Message.objects.filter(thread_id=run.thread_id, seq__gte=start, seq__lte=seqs[1])
        part = part.exclude(visibility="internal").order_by().values_list(*MESSAGE_FIELDS)
        query = part if query is None else query.union(part, all=True)
    if query is None:
        return found
    unique = {(row[0], row[1]): row for row in query}  # two runs of one thread share rows
    rows = [unique[key] for key in sorted(unique, key=lambda key: key[1])]
    for run in runs:
        seqs = seqs_of(run)
        if seqs is None:
            continue
        found[run.pk]["messages"] = [
            _message(row)
            for row in rows
            if row[0] == run.thread_id and seqs[1] - INPUT_SHOWN < row[1] <= seqs[1]
        ]
    return found


def _step_messages(
    runs: list[Run], pair: tuple[Run, Run, int] | None
) -> dict[Any, list[tuple[Any, ...]]]:
    """The messages each run produced, and those that reached its thread while it ran:
    one query per run (each capped at MAX_STEP_MESSAGES rows, in seq order). For a fork
    of the other run (`pair`: original, fork, fork step) also its copy of what the
    original wrote before the fork step (after the original's input)."""
    found: dict[Any, list[tuple[Any, ...]]] = {}
    for run in runs:
        after = (_input_range(run) or (0, 0))[1]
        end = _output_end(run)
        if pair is not None and run.pk == pair[1].pk:
            after = (_input_range(pair[0]) or (0, 0))[1]
            end = max(end, (_input_range(run) or (0, 0))[1])
        rows = (
            Message.objects.filter(thread_id=run.thread_id, seq__gt=after)
            .filter(Q(produced_by_run_id=run.pk) | Q(seq__lte=end))
            .exclude(visibility="internal")
            .order_by("seq")
            .values_list(*MESSAGE_FIELDS, "step_index")
        )
        found[run.pk] = list(rows[: MAX_STEP_MESSAGES + 1])
    return found


def _tool_calls(run_ids: list[Any]) -> dict[Any, list[ToolCall]]:
    found: dict[Any, list[ToolCall]] = {pk: [] for pk in run_ids}
    rows = ToolCall.objects.filter(run_id__in=run_ids, step_index__lt=MAX_STEPS).order_by(
        "run_id", "step_index", "created_at", "pk"
    )
    for call in rows[:MAX_TOOL_CALLS]:
        found[call.run_id].append(call)
    return found


def _tickets(run_ids: list[Any]) -> dict[Any, Any]:
    found: dict[Any, Any] = {pk: [] for pk in run_ids}
    rows = list(
        Ticket.objects.filter(run_id__in=run_ids)
        .select_related("decision", "tool_call")
        .order_by("created_at", "pk")[: MAX_TICKETS + 1]
    )
    for ticket in rows[:MAX_TICKETS]:
        found[ticket.run_id].append(ticket)
    found["truncated"] = len(rows) > MAX_TICKETS
    return found


# --- a fork beside its original ---------------------------------------------------------------


def _fork_pair(a: Run, b: Run) -> tuple[Run, Run, int] | None:
    """(original, fork, fork step) when one run was forked from the other."""
    for original, fork in ((a, b), (b, a)):
        if fork.forked_from_id == original.pk and fork.fork_step is not None:
            return original, fork, fork.fork_step
    return None


def _align_fork(
    pair: tuple[Run, Run, int],
    produced: dict[Any, list[tuple[Any, ...]]],
    step_calls: dict[Any, list[tuple[int, ToolCall, bool]]],
) -> None:
    """Number the fork's rows and tool calls as the original's (see `run_compare`).

    A fork's thread is a copy of the original's messages 1 … cut, seq for seq
    (runs/replays/services/forks.py): a copied message stands where the original's message of
    the same seq stood (in the step that wrote it), and the original's tool calls of the
    copied steps stand on the fork's side too (their results: the copied tool messages).
    The fork's own steps come after the fork step."""
    original, fork, step = pair
    cut = (_input_range(fork) or (0, 0))[1]
    wrote = {
        row[1]: row[6]
        for row in produced[original.pk]
        if row[5] == original.pk and row[6] is not None and row[6] < step
    }
    rows = []
    for row in produced[fork.pk]:
        if row[1] <= cut:  # a copy: the original's step, or input (no producer)
            index = wrote.get(row[1])
            rows.append((*row[:5], fork.pk if index is not None else None, index))
        elif row[5] == fork.pk and row[6] is not None:
            rows.append((*row[:6], row[6] + step))
        else:
            rows.append(row)
    produced[fork.pk] = rows
    copied = [(index, call, True) for index, call, _ in step_calls[original.pk] if index < step]
    own = [
        (index + step, call, False)
        for index, call, _ in step_calls[fork.pk]
        if index + step < MAX_STEPS
    ]
    step_calls[fork.pk] = copied + own


# --- one run's side --------------------------------------------------------------------------


def _text(content: Any) -> str:
    blocks = content if isinstance(content, list) else []
    return "".join(
        str(block.get("text", ""))
        for block in blocks
        if isinstance(block, dict) and block.get("type") == "text"
    )


def _message(row: tuple[Any, ...]) -> dict[str, Any]:
    return {
        "seq": row[1],
        "role": row[2],
        "text": _text(row[3]),
        "tool_call_id": row[4] or None,
    }


def _side(
    run: Run,
    inputs: dict[str, Any],
    produced: list[tuple[Any, ...]],
    calls: list[tuple[int, ToolCall, bool]],
    tickets: dict[Any, Any],
) -> dict[str, Any]:
    """The run's input and its steps by index, each {messages, text, tool_calls};
    `calls`: (step index, tool call, copied from the original run: a fork's copy)."""
    by_call = {t.tool_call_id: t for t in tickets[run.pk]}
    steps: dict[int, dict[str, Any]] = {}
    results: dict[str, str] = {}
    current = 0
    for row in produced[:MAX_STEP_MESSAGES]:
        mine = row[5] == run.pk and row[6] is not None
        index = row[6] if mine else current
        if mine:
            current = index + 1
        if index >= MAX_STEPS:
            continue
        step = steps.setdefault(index, {"messages": [], "text": "", "tool_calls": []})
        message = _message(row)
        step["messages"].append(message)
        if message["role"] == Message.Role.ASSISTANT and mine:
            step["text"] = (step["text"] + "\n" + message["text"]).strip("\n")
        if message["role"] == Message.Role.TOOL and message["tool_call_id"]:
            results[message["tool_call_id"]] = message["text"]  # the last one wins
    for index, call, copied in calls:  # the query leaves out calls without a step
        step = steps.setdefault(index, {"messages": [], "text": "", "tool_calls": []})
        ticket = None if copied else by_call.get(call.pk)
        step["tool_calls"].append(_call(call, results.get(call.call_id), ticket, copied))
    texts = [m["text"] for m in inputs["messages"] if m["role"] != Message.Role.TOOL]
    return {
        "input": {
            "messages": inputs["messages"],
            "text": "\n".join(texts),
            "tool_calls": [],
            "left_out": max(inputs["total"] - len(inputs["messages"]), 0),
        },
        "steps": steps,
        "tickets": tickets[run.pk],
        "truncated": len(produced) > MAX_STEP_MESSAGES,
    }


def _call(
    call: ToolCall, result: str | None, ticket: Ticket | None, copied: bool = False
) -> dict[str, Any]:
    return {
        "copied": copied,
        "call_id": call.call_id,
        "name": call.tool_name,
        "arguments": call.arguments,
        "status": call.status,
        "result": result,
        "duration_ms": call.duration_ms,
        "ticket": _ticket(ticket) if ticket is not None else None,
    }


def _decision_of(ticket: Ticket) -> Decision | None:
    try:
        return ticket.decision
    except Decision.DoesNotExist:
        return None


def _ticket(ticket: Ticket) -> dict[str, Any]:
    decision = _decision_of(ticket)
    return {
        "ticket_id": ticket.ticket_id,
        "tool_name": ticket.tool_name,
        "arguments": ticket.arguments,
        "status": ticket.status,
        "step": ticket.tool_call.step_index,
        "action": decision.action if decision else None,
        "decided_by": decision.actor_label if decision else None,
        "comment": decision.comment if decision else None,
        "decided_at": decision.created_at.isoformat() if decision else None,
    }


# --- rows -------------------------------------------------------------------------------------


def _calls_key(side: dict[str, Any] | None) -> list[Any]:
    if side is None:
        return []
    return [(c["name"], c["arguments"], c["status"], c["result"]) for c in side["tool_calls"]]


def _row(step: int | None, a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any]:
    text_a, text_b = (a or {}).get("text", ""), (b or {}).get("text", "")
    text_different = (a is None) != (b is None) or text_a != text_b
    tools_different = _calls_key(a) != _calls_key(b)
    return {
        "step": step,
        "label": "input" if step is None else f"step {step}",
        "different": text_different or tools_different,
        "text_different": text_different,
        "tools_different": tools_different,
        "text_diff": word_diff(text_a, text_b) if text_different else None,
        "a": a,
        "b": b,
    }


def word_diff(a: str, b: str) -> list[dict[str, str]]:
    """`a` → `b` word by word: [{op, text}] where op is `equal` (in both), `delete` (only
    in a) or `insert` (only in b); whitespace is kept with the words. Texts longer than
    DIFF_TEXT_CHARS are one delete and one insert."""
    if len(a) + len(b) > DIFF_TEXT_CHARS:
        return [
            part
            for part in ({"op": "delete", "text": a}, {"op": "insert", "text": b})
            if part["text"]
        ]
    words_a, words_b = WORDS.findall(a), WORDS.findall(b)
    parts: list[dict[str, str]] = []
    matcher = difflib.SequenceMatcher(None, words_a, words_b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            _add(parts, "equal", "".join(words_a[i1:i2]))
            continue
        _add(parts, "delete", "".join(words_a[i1:i2]))
        _add(parts, "insert", "".join(words_b[j1:j2]))
    return parts


def _add(parts: list[dict[str, str]], op: str, text: str) -> None:
    if not text:
        return
    if parts and parts[-1]["op"] == op:
        parts[-1]["text"] += text
    else:
        parts.append({"op": op, "text": text})


def _ticket_rows(a: list[Ticket], b: list[Ticket]) -> list[dict[str, Any]]:
    """The runs' tickets in creation order, the first of a beside the first of b, …"""
    rows = []
    for index in range(max(len(a), len(b))):
        left = _ticket(a[index]) if index < len(a) else None
        right = _ticket(b[index]) if index < len(b) else None
        keys = ("tool_name", "arguments", "status", "action", "comment")
        different = (left is None) != (right is None) or any(
            (left or {}).get(k) != (right or {}).get(k) for k in keys
        )
        rows.append({"index": index, "different": different, "a": left, "b": right})
    return rows


def runs_for_compare(ids: list[Any]) -> dict[Any, Run]:
    """The runs of `ids` (UUIDs) by id, with their agent and version: one query."""
    rows = Run.objects.select_related("agent", "agent_version").filter(pk__in=set(ids))
    return {run.pk: run for run in rows}
