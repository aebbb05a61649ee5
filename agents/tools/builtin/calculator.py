"""`calculator`: exact arithmetic on a parsed syntax tree (never `eval`)."""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

from runs.runtime.ports import ToolCallContext
from runs.runtime.types import ToolDescriptor, ToolResult


class CalculatorError(Exception):
    """An expression the calculator refuses or cannot evaluate; the message is for the model."""


Number = int | float

_MAX_EXPRESSION_LENGTH = 500
_MAX_EXPONENT = 1000
# Integers beyond ~1000 decimal digits are absurd for a calculator and slow to print.
_MAX_INT_BITS = 3322
_MAX_ROUND_DIGITS = 100
_MAX_FUNCTION_ARGS = 50

_BINARY_OPERATORS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}

_UNARY_OPERATORS: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}

_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e}


def _round(value: Number, ndigits: Number | None = None) -> Number:
    if ndigits is None:
        return round(value)
    if not isinstance(ndigits, int):
        raise CalculatorError("round() takes a whole number of digits.")
    if abs(ndigits) > _MAX_ROUND_DIGITS:
        raise CalculatorError(f"round() digits must be within ±{_MAX_ROUND_DIGITS}.")
    return round(value, ndigits)


# name -> (function, min args, max args)
_FUNCTIONS: dict[str, tuple[Callable[..., Number], int, int]] = {
    "sqrt": (math.sqrt, 1, 1),
    "abs": (abs, 1, 1),
    "round": (_round, 1, 2),
    "min": (lambda *args: min(args), 1, _MAX_FUNCTION_ARGS),
    "max": (lambda *args: max(args), 1, _MAX_FUNCTION_ARGS),
    "floor": (math.floor, 1, 1),
    "ceil": (math.ceil, 1, 1),
}


def _checked(value: Any) -> Number:
    """Refuse results that are not real numbers or whose magnitude is absurd."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CalculatorError("The result is not a real number.")
    if isinstance(value, float) and not math.isfinite(value):
        raise CalculatorError("The result is too large (overflow).")
    if isinstance(value, int) and value.bit_length() > _MAX_INT_BITS:
        raise CalculatorError("The result is too large (more than about 1000 digits).")
    return value


def _power(base: Number, exponent: Number) -> Number:
    if abs(exponent) > _MAX_EXPONENT:
        raise CalculatorError(f"Exponents larger than {_MAX_EXPONENT} are not allowed.")
    # |base| >= 2**(bits-1), so the result has at least (bits-1)*exponent+1 bits: refuse before
    # computing anything that large (the result is checked again afterwards).
    if (
        isinstance(base, int)
        and isinstance(exponent, int)
        and exponent > 0
        and (abs(base).bit_length() - 1) * exponent + 1 > _MAX_INT_BITS
    ):
        raise CalculatorError("The result is too large (more than about 1000 digits).")
    return base**exponent


def _evaluate(node: ast.AST) -> Number:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise CalculatorError(f"Unsupported literal: {node.value!r}. Only numbers are allowed.")
        return _checked(node.value)
    if isinstance(node, ast.Name):
        if node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        known = ", ".join(sorted(_CONSTANTS))
        raise CalculatorError(f"Unknown name '{node.id}'. Known constants: {known}.")
    if isinstance(node, ast.UnaryOp):
        unary = _UNARY_OPERATORS.get(type(node.op))
        if unary is None:
            raise CalculatorError(f"Unsupported operator: {type(node.op).__name__}.")
        return _checked(unary(_evaluate(node.operand)))
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.BitXor):
            raise CalculatorError("'^' is not supported; use '**' for powers.")
        binary = _BINARY_OPERATORS.get(type(node.op))
        if binary is None:
            raise CalculatorError(f"Unsupported operator: {type(node.op).__name__}.")
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow):
            return _checked(_power(left, right))
        return _checked(binary(left, right))
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
            known = ", ".join(sorted(_FUNCTIONS))
            raise CalculatorError(f"Unsupported function call. Known functions: {known}.")
        if node.keywords or any(isinstance(arg, ast.Starred) for arg in node.args):
            raise CalculatorError("Functions take plain positional arguments only.")
        function, min_args, max_args = _FUNCTIONS[node.func.id]
        if not min_args <= len(node.args) <= max_args:
            expected = str(min_args) if min_args == max_args else f"{min_args} to {max_args}"
            raise CalculatorError(
                f"{node.func.id}() takes {expected} argument(s), got {len(node.args)}."
            )
        return _checked(function(*(_evaluate(arg) for arg in node.args)))
    raise CalculatorError(f"Unsupported syntax: {type(node).__name__}.")


def evaluate_expression(expression: str) -> Number:
    """Evaluate arithmetic by walking its syntax tree; raises CalculatorError on anything else."""
    if len(expression) > _MAX_EXPRESSION_LENGTH:
        raise CalculatorError(f"Expressions are limited to {_MAX_EXPRESSION_LENGTH} characters.")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError) as exc:
        detail = exc.msg if isinstance(exc, SyntaxError) else str(exc)
        raise CalculatorError(f"Invalid expression: {detail}.") from None
    except (RecursionError, MemoryError):
        raise CalculatorError("The expression is nested too deeply.") from None
    try:
        return _evaluate(tree)
    except ZeroDivisionError:
        raise CalculatorError("Division by zero.") from None
    except OverflowError:
        raise CalculatorError("The result is too large (overflow).") from None
    except RecursionError:
        raise CalculatorError("The expression is nested too deeply.") from None
    except (ValueError, TypeError) as exc:
        raise CalculatorError(f"Math error: {exc}.") from None


class CalculatorTool:
    """Exact arithmetic, because models are unreliable at it; never `eval`s model text."""

    name = "calculator"

    @property
    def descriptor(self) -> ToolDescriptor:
        return ToolDescriptor(
            name=self.name,
            description=(
                "Evaluate an arithmetic expression. Supports numbers, + - * / // % **, "
                "parentheses, sqrt, abs, round, min, max, floor, ceil and the constants pi, e."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "expression": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": _MAX_EXPRESSION_LENGTH,
                        "description": "For example: (2 + 3) * sqrt(16) / 7",
                    }
                },
                "required": ["expression"],
                "additionalProperties": False,
            },
        )

    def execute(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
        expression = arguments["expression"]
        try:
            result = evaluate_expression(expression)
        except CalculatorError as exc:
            return ToolResult.error(self.name, str(exc))
        return ToolResult.success(self.name, {"expression": expression, "result": result})
