"""The LangGraph peer's graph for the model-bound bench (bench/model_bound.py): the same
model -> tool -> model run, the model being langchain-openai's ChatOpenAI on the bench's
model server (bench/model_server.py, base URL in BENCH_MODEL_BASE_URL), streamed, awaited
in an async node as LangGraph's docs recommend for I/O.

Loaded by `langgraph dev` from the peers' environment (.venv-peers), never by the
project's own.
"""

from __future__ import annotations

import os
from typing import Any

from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition


@tool
def calculator(expression: str) -> str:
    """Evaluate a product of two integers written as 'a*b'."""
    left, right = expression.split("*", 1)
    return str(int(left) * int(right))


llm = ChatOpenAI(
    model="bench-model",
    base_url=os.environ.get("BENCH_MODEL_BASE_URL", "http://127.0.0.1:8765/v1"),
    api_key="not-needed",  # type: ignore[arg-type]
    streaming=True,
    stream_usage=True,
    max_retries=0,
    timeout=120,
).bind_tools([calculator])


async def model(state: MessagesState) -> dict[str, Any]:
    return {"messages": [await llm.ainvoke(state["messages"])]}


def build() -> StateGraph:
    graph = StateGraph(MessagesState)
    graph.add_node("model", model)
    graph.add_node("tools", ToolNode([calculator]))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph


model_bound = build().compile()
