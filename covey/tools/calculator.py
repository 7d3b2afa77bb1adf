"""The ``calculator`` built-in: arithmetic only, bounded, since the model writes the expression."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable

_BINARY: dict[type, Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type, Callable[[float], float]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}
# The model writes the expression, so it is untrusted: these bounds keep one
# tool call from pinning a worker's CPU or memory (`9**9**9`, 50,000 nested terms).
MAX_EXPRESSION_CHARS = 500
MAX_RESULT_BITS = 4096


def calculate(expression: str) -> str:
    """Evaluate arithmetic only (no names, no calls); integral results print as ints."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    value = _eval(ast.parse(expression, mode="eval").body)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def _eval(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and _int_bits(left) * abs(right) > MAX_RESULT_BITS:
            raise ValueError("result too large")
        return _bounded(_BINARY[type(node.op)](left, right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    raise ValueError("only numbers and + - * / // % ** ( ) are allowed")


def _int_bits(value: float) -> int:
    return abs(int(value)).bit_length() if abs(value) >= 2 else 1


def _bounded(value: float) -> float:
    if isinstance(value, int) and value.bit_length() > MAX_RESULT_BITS:
        raise ValueError("result too large")
    return value
