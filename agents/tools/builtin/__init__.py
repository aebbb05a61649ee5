"""The built-in tools, one module per family. Each is a plain class with a strict JSON
schema: the runtime validates arguments against it before `execute`, so `execute` only
handles well-typed input and turns expected failures into error results the model can
read and correct.

- `calculator`: `calculator` (arithmetic on a syntax tree, never `eval`)
- `clock`: `current_time`, `sleep`
- `notes`: `write_note` (idempotent per run and tool call)
- `mail`: `send_email`
- `web`: `http_get` (SSRF guard, pinned address, no redirects)
- `human`: `ask_human` (waits on an operator's answer)
- `report`: `slow_report` (starts background work the run waits for)
"""

from __future__ import annotations

from collections.abc import Callable

from runs.runtime.ports import Tool

from .calculator import CalculatorError, CalculatorTool, evaluate_expression
from .clock import CurrentTimeTool, SleepTool
from .human import AskHumanTool
from .mail import SendEmailTool
from .notes import WriteNoteTool
from .report import SlowReportTool
from .web import FetchError, HttpGetTool

__all__ = [
    "BUILTIN_TOOLS",
    "AskHumanTool",
    "CalculatorError",
    "CalculatorTool",
    "CurrentTimeTool",
    "FetchError",
    "HttpGetTool",
    "SendEmailTool",
    "SleepTool",
    "SlowReportTool",
    "WriteNoteTool",
    "evaluate_expression",
]

BUILTIN_TOOLS: tuple[Callable[[], Tool], ...] = (
    AskHumanTool,
    CalculatorTool,
    CurrentTimeTool,
    HttpGetTool,
    SendEmailTool,
    SleepTool,
    SlowReportTool,
    WriteNoteTool,
)
