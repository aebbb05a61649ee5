"""The LangGraph peer's graph: model step, tool step, model step, with no LLM.

Loaded by `langgraph dev` from the peers' environment (.venv-peers), never by the
project's own. "model" emits an AI message calling `calculator` on 6*7 until the tool
has answered, then answers "42"; "tools" runs the call. `approval` is the same graph
compiled with `interrupt_before=["tools"]`: the run stops before the tool step and the
client resumes the thread.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition


@tool
def calculator(expression: str) -> str:
    """Evaluate a product of two integers written as 'a*b'."""
    left, right = expression.split("*", 1)
    return str(int(left) * int(right))


def model(state: MessagesState) -> dict[str, Any]:
    if any(isinstance(message, ToolMessage) for message in state["messages"]):
        return {"messages": [AIMessage(content="42")]}
    call = {
        "name": "calculator",
        "args": {"expression": "6*7"},
        "id": "call_calc",
        "type": "tool_call",
    }
    return {"messages": [AIMessage(content="", tool_calls=[call])]}


def build() -> StateGraph:
    graph = StateGraph(MessagesState)
    graph.add_node("model", model)
    graph.add_node("tools", ToolNode([calculator]))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "model")
    return graph


plain = build().compile()
approval = build().compile(interrupt_before=["tools"])
