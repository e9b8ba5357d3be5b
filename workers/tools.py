"""Tools for task workers and branches: plain async callables with a JSON schema, in a registry.

An operator or a plugin registers a tool with :meth:`ToolRegistry.register` (or
the :meth:`ToolRegistry.tool` decorator); the function receives the model's
arguments as keyword arguments and returns a string or anything JSON-serialisable.
tierbot ships a few safe tools that need no network, no shell and no file access:
``memory_recall`` and ``memory_save`` (when memory is enabled),
``conversation_search`` (the channel's own message log, archived messages
included), ``calculate`` and ``current_time``.

Invariant: :meth:`ToolRegistry.run` never raises for a tool's failure; bad
arguments, a :class:`~tierbot.errors.ToolError`, a timeout or a crash all become a
JSON ``{"error": ...}`` result the model can read and react to.

Also here: the structure of tool traffic in a ``ChatMessage`` list (a call and
its results form one unit that compaction may drop but never split) and its
token cost, shared by branches and task workers.
"""

from __future__ import annotations

import ast
import asyncio
import json
import math
import operator
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import structlog

from tierbot.errors import ToolError
from tierbot.llm.base import ChatMessage, ToolCall, ToolSpec
from tierbot.llm.text import Overlap
from tierbot.messages import Message, Role
from tierbot.storage import MessageStore
from tierbot.tokens import TokenCounter
from workers.compaction import MemoryWriter

log = structlog.get_logger("tierbot.workers.tools")

ToolFn = Callable[..., Awaitable[Any]]
MAX_RESULT_CHARS = 16_000
_OBJECT: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}


class Recaller(Protocol):
    """memory_recall as the memory graph offers it (a channel's ``MemoryAccess``)."""

    def recall_tool(self) -> ToolSpec: ...

    async def recall_from_tool(self, arguments: dict[str, Any], *, channel: str) -> str: ...

    async def forgotten_messages(self, channel: str, messages: Sequence[Message]) -> set[str]:
        """The platform ids of ``messages`` that people asked to be forgotten."""
        ...


@dataclass(frozen=True, slots=True)
class Tool:
    """One tool: what the model sees (``spec``), the function that runs it, its time limit."""

    spec: ToolSpec
    fn: ToolFn
    timeout: float = 30.0

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool call produced: the text the model reads, and whether it succeeded."""

    text: str
    ok: bool


class ToolRegistry:
    """Named tools; later registrations replace earlier ones of the same name."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {t.name: t for t in tools}

    def add(self, tool: Tool) -> Tool:
        self._tools[tool.name] = tool
        return tool

    def register(
        self,
        name: str,
        fn: ToolFn,
        *,
        description: str,
        parameters: dict[str, Any] | None = None,
        timeout: float = 30.0,
    ) -> Tool:
        """Register ``fn`` as tool ``name``; ``parameters`` is the JSON schema of its arguments."""
        return self.add(Tool(ToolSpec(name, description, parameters or dict(_OBJECT)), fn, timeout))

    def tool(
        self,
        *,
        description: str,
        name: str | None = None,
        parameters: dict[str, Any] | None = None,
        timeout: float = 30.0,
    ) -> Callable[[ToolFn], ToolFn]:
        """Decorator form of :meth:`register` (the tool is named after the function)."""

        def wrap(fn: ToolFn) -> ToolFn:
            self.register(
                name or fn.__name__,
                fn,
                description=description,
                parameters=parameters,
                timeout=timeout,
            )
            return fn

        return wrap

    def merged(self, *others: ToolRegistry) -> ToolRegistry:
        """A new registry with this one's tools, then each of ``others`` (later names win)."""
        out = ToolRegistry(self._tools.values())
        for other in others:
            for t in other._tools.values():
                out.add(t)
        return out

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def specs(self) -> list[ToolSpec]:
        return [t.spec for t in self._tools.values()]

    async def run(self, call: ToolCall) -> ToolResult:
        """Run one call; every failure becomes an error result (see the module docstring)."""
        tool = self._tools.get(call.name)
        if tool is None:
            return _error(f"unknown tool {call.name!r}; available: {', '.join(self._tools)}")
        problem = _check_arguments(tool.spec, call.arguments)
        if problem:
            return _error(f"{call.name}: {problem}")
        try:
            async with asyncio.timeout(tool.timeout):
                value = await tool.fn(**call.arguments)
        except ToolError as exc:
            return _error(str(exc))
        except TimeoutError:
            return _error(f"{call.name} timed out after {tool.timeout:g} s")
        except Exception as exc:  # a plugin's bug is the model's error result, not our crash
            log.warning("tool.failed", tool=call.name, error=f"{type(exc).__name__}: {exc}")
            return _error(f"{call.name} failed: {type(exc).__name__}: {exc}")
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        if len(text) > MAX_RESULT_CHARS:
            text = text[:MAX_RESULT_CHARS] + f" …[truncated {len(text) - MAX_RESULT_CHARS} chars]"
        return ToolResult(text, ok=not _is_error(text))


def _error(message: str) -> ToolResult:
    return ToolResult(json.dumps({"error": message}), ok=False)


def _is_error(text: str) -> bool:
    if not text.startswith('{"error"'):
        return False
    try:
        return "error" in json.loads(text)
    except json.JSONDecodeError:
        return False


def _check_arguments(spec: ToolSpec, arguments: Any) -> str:
    """The first problem of ``arguments`` against the schema's required and known names."""
    if not isinstance(arguments, dict):
        return "arguments must be a JSON object"
    props = spec.parameters.get("properties", {})
    missing = [n for n in spec.parameters.get("required", []) if n not in arguments]
    if missing:
        return f"missing required argument {missing[0]!r}"
    if spec.parameters.get("additionalProperties") is False:
        extra = [n for n in arguments if n not in props]
        if extra:
            return f"unknown argument {extra[0]!r}; expected one of {', '.join(props) or 'none'}"
    return ""


# -- built-in tools ---------------------------------------------------------------------------

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_FUNCS: dict[str, Callable[..., Any]] = {
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
    "log": math.log,
    "exp": math.exp,
    "floor": math.floor,
    "ceil": math.ceil,
}
_CONSTS = {"pi": math.pi, "e": math.e}


def evaluate(expression: str) -> float | int:
    """Evaluate arithmetic safely (numbers, + - * / // % **, a few math functions).

    Raises :class:`ToolError` for anything else, and for results too large to be useful.
    """
    if len(expression) > 500:
        raise ToolError("expression: longer than 500 characters", tool="calculate")
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        raise ToolError(f"expression: not arithmetic ({exc.msg})", tool="calculate") from None

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return node.value
        if isinstance(node, ast.Name) and node.id in _CONSTS:
            return _CONSTS[node.id]
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](ev(node.operand))
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Pow) and (abs(right) > 1000 or abs(left) > 1e100):
                raise ToolError("expression: exponent too large", tool="calculate")
            return _BINARY[type(node.op)](left, right)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _FUNCS
            and not node.keywords
        ):
            return _FUNCS[node.func.id](*[ev(a) for a in node.args])
        raise ToolError(
            f"expression: {type(node).__name__} is not allowed; use numbers, + - * / // % ** "
            f"and {', '.join(_FUNCS)}",
            tool="calculate",
        )

    try:
        value = ev(tree)
    except (ArithmeticError, ValueError, TypeError) as exc:
        raise ToolError(f"expression: {exc}", tool="calculate") from None
    if isinstance(value, int) and value.bit_length() > 4096:
        raise ToolError("expression: the result is too large", tool="calculate")
    return value  # type: ignore[no-any-return]


def _calculate_tool() -> Tool:
    async def calculate(expression: str) -> dict[str, Any]:
        return {"expression": expression, "value": evaluate(str(expression))}

    spec = ToolSpec(
        "calculate",
        "Evaluate an arithmetic expression exactly (+ - * / // % **, sqrt, log, round...).",
        {
            "type": "object",
            "properties": {"expression": {"type": "string"}},
            "required": ["expression"],
            "additionalProperties": False,
        },
    )
    return Tool(spec, calculate, timeout=5.0)


def _time_tool() -> Tool:
    async def current_time() -> dict[str, Any]:
        now = time.time()
        iso = datetime.fromtimestamp(now, UTC).isoformat(timespec="seconds")
        return {"utc": iso, "unix": round(now, 3)}

    spec = ToolSpec("current_time", "The current date and time (UTC).", dict(_OBJECT))
    return Tool(spec, current_time, timeout=1.0)


#: Which of some messages were forgotten (platform ids): :meth:`Recaller.forgotten_messages`.
Forgotten = Callable[[str, Sequence[Message]], Awaitable[set[str]]]


def _search_tool(
    store: MessageStore, channel: str, forgotten: Forgotten | None = None, scan_limit: int = 20_000
) -> Tool:
    async def conversation_search(query: str, limit: int = 5) -> list[dict[str, Any]]:
        if not isinstance(query, str) or not query.strip():
            raise ToolError("query: must be a non-empty string", tool="conversation_search")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 20:
            raise ToolError("limit: must be an integer from 1 to 20", tool="conversation_search")
        recent: deque[Any] = deque(maxlen=scan_limit)
        async for m in store.export(channel):
            if m.role in (Role.USER, Role.ASSISTANT) and m.text.strip():
                recent.append(m)
        pool = list(recent)

        def rank() -> list[tuple[float, int]]:
            scores = Overlap([m.text for m in pool]).scores(query)
            # Later messages win ties: the most recent word on a topic.
            return sorted(((s, i) for i, s in enumerate(scores) if s > 0), reverse=True)

        ranked = await asyncio.to_thread(rank) if pool else []
        if forgotten is not None and ranked:
            # What someone asked to be forgotten stays in the log (the archive keeps
            # everything) but is no longer found.
            gone = await forgotten(channel, [pool[i] for _, i in ranked])
            ranked = [(s, i) for s, i in ranked if pool[i].platform_id not in gone]
        ranked = ranked[:limit]
        return [
            {
                "content": pool[i].text,
                "author": pool[i].author_name or pool[i].author_id or pool[i].role.value,
                # "assistant": the bot's own reply, which may quote someone else.
                "role": pool[i].role.value,
                "message_id": pool[i].platform_id,
                "ts": pool[i].ts,
                "archived": pool[i].state.value == "archived",
                "score": round(s, 3),
            }
            for s, i in ranked
        ]

    spec = ToolSpec(
        "conversation_search",
        "Search everything said in this conversation, including messages no longer in view "
        "(archived by compaction). Returns the best-matching messages verbatim, best first.",
        {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for, in plain words."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    )
    return Tool(spec, conversation_search, timeout=30.0)


def memory_tools_for(
    channel: str, recall: Recaller | None, writer: MemoryWriter | None
) -> list[Tool]:
    """memory_recall and memory_save bound to ``channel``; none when memory is off."""
    tools = []
    if recall is not None:

        async def memory_recall(**arguments: Any) -> str:
            return await recall.recall_from_tool(arguments, channel=channel)

        tools.append(Tool(recall.recall_tool(), memory_recall))
    if writer is not None:

        async def memory_save(**arguments: Any) -> str:
            return await writer.save_from_tool(arguments, channel=channel, covered=())

        tools.append(Tool(writer.save_tool(), memory_save))
    return tools


def builtin_tools(
    channel: str,
    *,
    store: MessageStore | None = None,
    recall: Recaller | None = None,
    writer: MemoryWriter | None = None,
    general: bool = True,
) -> ToolRegistry:
    """tierbot's safe tools for ``channel``: memory (if on), conversation_search (if a store is
    given) and, when ``general``, calculate and current_time."""
    tools = memory_tools_for(channel, recall, writer)
    if store is not None:
        tools.append(
            _search_tool(store, channel, recall.forgotten_messages if recall is not None else None)
        )
    if general:
        tools += [_calculate_tool(), _time_tool()]
    return ToolRegistry(tools)


# -- tool traffic in a message list ------------------------------------------------------------


def message_tokens(counter: TokenCounter, m: ChatMessage) -> int:
    """What one message costs in a request: its text, framing, and its tool calls' JSON."""
    n = counter.count_message(m.content)
    if m.tool_calls:
        n += counter.count(json.dumps([asdict(c) for c in m.tool_calls]))
    return n


def specs_tokens(counter: TokenCounter, specs: Sequence[ToolSpec]) -> int:
    """What offering ``specs`` costs in a request (the schema JSON)."""
    return counter.count(json.dumps([asdict(s) for s in specs])) if specs else 0


def units(messages: Sequence[ChatMessage]) -> list[list[ChatMessage]]:
    """Split ``messages`` into units compaction may drop whole: an assistant message with its
    tool results, or any other single message."""
    out: list[list[ChatMessage]] = []
    for m in messages:
        if m.role == "tool" and out and out[-1][0].role == "assistant" and out[-1][0].tool_calls:
            out[-1].append(m)
        else:
            out.append([m])
    return out


def sanitize(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """Drop tool results whose call is missing and tool calls whose result is missing.

    Providers reject both; they appear in a copy taken mid-turn (the call that
    started a branch has no result yet) or at the edge of a cut.
    """
    answered = {m.tool_call_id for m in messages if m.role == "tool"}
    out: list[ChatMessage] = []
    open_calls: set[str] = set()
    for m in messages:
        if m.role == "tool":
            if m.tool_call_id in open_calls:
                out.append(m)
            continue
        if m.tool_calls:
            kept = tuple(c for c in m.tool_calls if c.id in answered)
            if len(kept) != len(m.tool_calls):
                m = ChatMessage(m.role, m.content, m.name, kept, m.tool_call_id)
            if not kept and not m.content:
                continue
            open_calls = {c.id for c in kept}
        else:
            open_calls = set()
        out.append(m)
    return out
