"""Edit a compose service's `command:` through YAML's own node positions, then prove it.

PyYAML composes the file into nodes that know their bytes: a block list's items, a flow
list's items, or one command string. Items are replaced, inserted or deleted by those bytes
(a block item by its whole line), so comments, anchors and other services stay as written.
The result is loaded again: the service's command must equal the planned one and the rest of
the document must load unchanged; otherwise nothing is written.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from typing import Any

import yaml

from dflash_doctor.errors import FactError

_PLAIN = re.compile(r"--?[A-Za-z][\w.-]*")
Plan = Callable[[list[str]], list[str]]


def _load(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError, ValueError):
        raise FactError("the compose file is not valid YAML") from None


def _entry(node: yaml.Node, key: str) -> yaml.Node | None:
    if not isinstance(node, yaml.MappingNode):
        return None
    for k, v in node.value:
        if isinstance(k, yaml.ScalarNode) and k.value == key:
            return v if isinstance(v, yaml.Node) else None
    return None


def _argv_of(node: yaml.Node | None) -> list[str]:
    if isinstance(node, yaml.ScalarNode):
        try:
            return shlex.split(node.value) if node.value else []
        except ValueError as e:
            raise FactError(f"the compose command string cannot be split: {e}") from None
    if isinstance(node, yaml.SequenceNode):
        return [str(item.value) for item in node.value if isinstance(item, yaml.ScalarNode)]
    return []


def _runs_sglang(argv: list[str]) -> bool:
    return any("launch_server" in a or a == "serve" for a in argv)


def _service(
    text: str, service: str | None, runs: Callable[[list[str]], bool] = _runs_sglang
) -> tuple[str, yaml.Node]:
    """The service that runs the server (`runs`: SGLang's by default), or the named one, and
    its `command:` node."""
    try:
        root = yaml.compose(text)
    except (yaml.YAMLError, RecursionError, ValueError):
        raise FactError("the compose file is not valid YAML") from None
    services = _entry(root, "services") if root is not None else None
    if not isinstance(services, yaml.MappingNode):
        raise FactError("compose file has no services")
    for k, svc in services.value:
        if service is not None and k.value != service:
            continue
        command = _entry(svc, "command")
        argv = _argv_of(_entry(svc, "entrypoint")) + _argv_of(command)
        if service is not None or runs(argv):
            if command is None or (
                command.tag != "tag:yaml.org,2002:str"
                and not isinstance(command, yaml.SequenceNode)
            ):
                raise FactError(f"service {k.value}: no `command:` string or list to edit")
            return str(k.value), command
    raise FactError("no compose service runs the server")


def _scalar(word: str) -> str:
    """A list item as YAML: flag names plain, everything else double-quoted (JSON is YAML)."""
    return word if _PLAIN.fullmatch(word) else json.dumps(word)


def _rewrite_block(text: str, items: list[yaml.Node], new: list[str]) -> str:
    """A block list, `- item` per line: items kept as they are stay as written (comments
    between them too); dropped ones lose their line; new ones get a line of their own with
    the first item's prefix, before the next kept item."""
    lines = text.splitlines(keepends=True)
    at = [it.start_mark.line for it in items]
    if len(set(at)) != len(at) or any(it.end_mark.line != it.start_mark.line for it in items):
        raise FactError("the compose command list is not one item per line; edit it by hand")
    first = items[0].start_mark
    prefix = lines[first.line][: first.column]
    eol = "\r\n" if "\r\n" in text else "\n"
    keep = _common([str(it.value) for it in items], new)
    out = lines[: at[0]]
    emitted = 0
    for n, line in enumerate(lines[at[0] : at[-1] + 1], start=at[0]):
        if n not in at:
            out.append(line)  # a comment or blank line between items
            continue
        k = keep.get(at.index(n))
        if k is None:
            continue
        out += [prefix + _scalar(w) + eol for w in new[emitted:k]]
        out.append(line)
        emitted = k + 1
    out += [prefix + _scalar(w) + eol for w in new[emitted:]]
    return "".join(out + lines[at[-1] + 1 :])


def _common(old: list[str], new: list[str]) -> dict[int, int]:
    """old index -> new index of the items kept as they are (a longest common subsequence)."""
    import difflib

    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    kept: dict[int, int] = {}
    for block in matcher.get_matching_blocks():
        for n in range(block.size):
            kept[block.a + n] = block.b + n
    return kept


def edit_command(
    text: str,
    plan: Plan,
    service: str | None = None,
    runs: Callable[[list[str]], bool] = _runs_sglang,
) -> str:
    """`text` with the service's command replaced by `plan(command)`, proved by loading;
    `runs`: which service runs the server when none is named (SGLang's by default)."""
    name, node = _service(text, service, runs)
    before_doc = _load(text)
    old = _argv_of(node)
    new = plan(old)
    if isinstance(node, yaml.ScalarNode):
        s, e = node.start_mark.index, node.end_mark.index
        out = text[:s] + json.dumps(shlex.join(new)) + text[e:]
    elif isinstance(node, yaml.SequenceNode) and node.flow_style:
        s, e = node.start_mark.index, node.end_mark.index
        out = text[:s] + "[" + ", ".join(_scalar(w) for w in new) + "]" + text[e:]
    else:
        out = _rewrite_block(text, list(node.value), new)
    after_doc = _load(out)
    try:
        got = _argv_of(_service(out, name)[1])
        before_doc["services"][name].pop("command")
        after_doc["services"][name].pop("command")
    except (FactError, KeyError, TypeError, AttributeError):
        raise FactError("refused: the edited compose file would not read back") from None
    if got != new:
        raise FactError("refused: the edited compose file would not run the planned command")
    if before_doc != after_doc:
        raise FactError("refused: the edit would change more of the compose file than its command")
    return out
