"""Reads for forking a run: its step boundaries (with a short preview of each), the
messages a fork at a boundary copies, the messages it may edit, and a run's forks.

Where boundary N of a run R cuts its thread (`fork_cuts`): the thread is an append-only
log and a thread has at most one open run, so while R is open only R writes to it:
its own output (assistant and tool messages stamped `produced_by_run = R` with their
0-based `step_index`) and the input R takes (its trigger input, a queued input that
started it, steer input delivered between two steps, background results delivered at
an activation's start, input that continued it while it waited; all unstamped user
messages). Boundary N keeps every message of the log before the first message R
produced in a step >= N: the conversation before R (earlier runs on the thread), R's
input, what R wrote in steps 0..N-1 and the input delivered to it before step N. When R
produced nothing in a step >= N (N = R.steps, after its last step) the cut is the end
of R's part of the log: its last output, or the end of its input range
(`R.input.range.to_seq`) when that is later (input that continued a waiting run).
So boundary 0 is R's input and boundary R.steps everything R read and wrote; later runs'
messages are never part of a fork. A prefix is always contiguous (seq 1..cut).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from django.db.models import QuerySet

from runs.models import Message, Run
from runs.wording import say, transcript_text

PREVIEW_CHARS = 120
# editable tool results the fork form offers (the API takes any tool message's seq)
FORM_TOOL_RESULTS = 50


@dataclass(frozen=True)
class ForkBoundary:
    """Step boundary `step` of a run: a fork copies the thread's messages 1..`cut`."""

    step: int
    cut: int
    label: str
    preview: str


def _input_end(run: Run) -> int:
    found = ((run.input or {}).get("range") or {}).get("to_seq")
    return found if isinstance(found, int) else 0


def fork_cuts(run: Run) -> list[int]:
    """The last seq a fork of `run` copies at each boundary 0..run.steps (module doc)."""
    outputs = list(
        Message.objects.filter(thread_id=run.thread_id, produced_by_run_id=run.pk).values_list(
            "seq", "step_index"
        )
    )
    end = max([_input_end(run), *(seq for seq, _ in outputs)])
    # first[i]: the first message produced in step i; a boundary cuts before the first
    # message of its step or any later one (one pass from the last step back)
    first: dict[int, int] = {}
    for seq, index in outputs:
        if index is not None and (index not in first or seq < first[index]):
            first[index] = seq
    earliest = [0] * (run.steps + 1)
    later: int | None = min(
        (seq for index, seq in first.items() if index > run.steps), default=None
    )
    for step in range(run.steps, -1, -1):
        if step in first:
            later = first[step] if later is None else min(later, first[step])
        earliest[step] = later - 1 if later is not None else end
    return earliest


def fork_prefix(run: Run, cut: int) -> list[Message]:
    """The thread's messages 1..`cut`, in order."""
    return list(Message.objects.filter(thread_id=run.thread_id, seq__lte=cut).order_by("seq"))


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


def message_preview(message: Message) -> str:
    """One line about a message: its role and text, or the tools an assistant calls."""
    if message.role == Message.Role.ASSISTANT and message.tool_calls:
        calls = ", ".join(str(c.get("name", "?")) for c in message.tool_calls)
        text = message.text.strip()
        return _short(f"{say('assistant', 'role')}: {text + ' ' if text else ''}[calls {calls}]")
    return _short(f"{say(message.role, 'role')}: {transcript_text(message.text)}")


def fork_boundaries(
    run: Run,
    messages: list[Message] | None = None,
    cuts: list[int] | None = None,
    steps: list[int] | None = None,
) -> list[ForkBoundary]:
    """Every boundary of `run` (or those of `steps`) with a preview: for 0 the last user
    message of its input, for N the messages between boundary N-1 and N (what step N-1
    wrote, and input delivered before step N). `messages` (the thread's messages up to the
    last cut, in order) and `cuts`: when the caller read them already."""
    cuts = cuts if cuts is not None else fork_cuts(run)
    if messages is None:
        messages = fork_prefix(run, cuts[-1])
    seqs = [m.seq for m in messages]
    result = []
    for step in steps if steps is not None else range(len(cuts)):
        cut = cuts[step]
        if step == 0:
            users = [m for m in messages[: bisect_right(seqs, cut)] if m.role == Message.Role.USER]
            preview = message_preview(users[-1]) if users else "(no input)"
            label = "0 · before the first step (its input)"
        else:
            between = messages[bisect_right(seqs, cuts[step - 1]) : bisect_right(seqs, cut)]
            preview = " → ".join(message_preview(m) for m in between) or "(nothing written)"
            label = f"{step} · after step {step}"
        result.append(ForkBoundary(step=step, cut=cut, label=label, preview=_short(preview)))
    return result


# step boundaries the fork form lists at most (about): a run of thousands of steps lists
# its first and last boundaries, every k-th one and those around the chosen one
FORM_BOUNDARIES = 60
FORM_AROUND = 10  # boundaries listed on each side of the chosen one
FORM_LADDER = 30  # about how many of every k-th boundary


def form_steps(count: int, chosen: int) -> list[int]:
    """The boundaries (0..count-1) the fork form lists with `chosen` picked: all of them
    up to FORM_BOUNDARIES, else the first, the last, every k-th and those around
    `chosen`; picking one re-renders the form with those around it."""
    if count <= FORM_BOUNDARIES:
        return list(range(count))
    stride = -(-(count - 1) // FORM_LADDER)
    listed = set(range(0, count, stride)) | {count - 1}
    listed |= set(range(max(chosen - FORM_AROUND, 0), min(chosen + FORM_AROUND, count - 1) + 1))
    return sorted(listed)


def editable_messages(prefix: list[Message]) -> list[Message]:
    """What a fork of `prefix` may edit: its last user message and its tool results."""
    last_user = next((m for m in reversed(prefix) if m.role == Message.Role.USER), None)
    return [m for m in prefix if m.role == Message.Role.TOOL or m is last_user]


def fork_form_choices(prefix: list[Message]) -> list[Message]:
    """`editable_messages` as the fork form lists them: the last user message and the
    latest FORM_TOOL_RESULTS tool results, in log order."""
    editable = editable_messages(prefix)
    tools = [m for m in editable if m.role == Message.Role.TOOL][-FORM_TOOL_RESULTS:]
    return [m for m in editable if m.role != Message.Role.TOOL or m in tools]


FORK_VERSION_LABELS = {
    "original": "original: the version this run used",
    "latest": "latest: the latest published version",
    "draft": "draft: the agent's current draft (must validate)",
}


@dataclass(frozen=True)
class ForkPanel:
    """What the run page's fork form shows: the boundaries, the chosen one, the messages
    that may be edited there, the chosen one of those and the text its textarea holds."""

    boundaries: list[ForkBoundary]  # those listed (form_steps): all but for long runs
    step: int
    choices: list[Message]
    edit: Message | None
    edit_text: str
    version: str
    versions: dict[str, str]
    error: str = ""
    boundary_count: int = 0  # the run's boundaries, listed or not

    @property
    def unlisted(self) -> int:
        return self.boundary_count - len(self.boundaries)


def fork_panel(
    run: Run,
    *,
    step: int | None = None,
    edit_seq: int | None = None,
    version: str = "",
    edit_text: str | None = None,
    error: str = "",
) -> ForkPanel:
    """The fork form at boundary `step` (default: after the last step) with message
    `edit_seq` chosen for editing (ignored unless editable there); its textarea holds
    `edit_text`, else the message's text. Two queries."""
    cuts = fork_cuts(run)
    messages = fork_prefix(run, cuts[-1])
    chosen = step if step is not None and 0 <= step < len(cuts) else len(cuts) - 1
    choices = fork_form_choices([m for m in messages if m.seq <= cuts[chosen]])
    edit = next((m for m in choices if m.seq == edit_seq), None)
    return ForkPanel(
        boundaries=fork_boundaries(run, messages, cuts, form_steps(len(cuts), chosen)),
        boundary_count=len(cuts),
        step=chosen,
        choices=choices,
        edit=edit,
        edit_text=edit_text if edit_text is not None else (edit.text if edit else ""),
        version=version if version in FORK_VERSION_LABELS else "original",
        versions=FORK_VERSION_LABELS,
        error=error,
    )


def run_forks(run: Run) -> QuerySet[Run]:
    """The runs forked from `run`, newest first."""
    return (
        Run.objects.filter(forked_from_id=run.pk)
        .select_related("agent", "agent_version")
        .order_by("-created_at", "-id")
    )
