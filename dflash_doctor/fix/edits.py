"""Edit a launch source in place, keeping its comments, layout and variables.

Pure text in, text out. Shell scripts and systemd units: the launch command is one logical
line (backslash continuations); a flag is changed where it stands, a new flag goes on a new
continuation line indented like its neighbours. Compose files: `command:` lists.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from dflash_doctor.checks.base import Fix
from dflash_doctor.errors import FactError
from dflash_doctor.facts.launch import logical_lines
from dflash_doctor.facts.models import LaunchArgs

EDITABLE = ("set_flag", "remove_flag", "replace_flag")


@dataclass(frozen=True)
class Edit:
    action: str
    flag: str
    value: str | None = None
    replaces: str | None = None

    @classmethod
    def of(cls, fix: Fix) -> Edit:
        assert fix.flag is not None
        return cls(fix.action, fix.flag, fix.value, fix.replaces)


def _flag_re(flag: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w-]){re.escape(flag)}(?![\w-])(?:(=)(\S*)|([ \t]+)(?!-)(\S+))?")


def _split_comment(line: str) -> tuple[str, str]:
    """Code and trailing `# comment` of a shell line (a `#` inside quotes is not one)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i], line[i:]
    return line, ""


def _quote(value: str) -> str:
    return shlex.quote(value)


class _Command:
    """The physical lines of one logical launch command inside a file's lines."""

    def __init__(self, lines: list[str], first: int, last: int) -> None:
        self.lines = lines
        self.first = first - 1  # 0-based
        self.last = last - 1

    def find(self, flag: str) -> tuple[int, re.Match[str]] | None:
        pattern = _flag_re(flag)
        for i in range(self.first, self.last + 1):
            code, _ = _split_comment(self.lines[i])
            m = pattern.search(code)
            if m:
                return i, m
        return None

    def set(self, flag: str, value: str | None) -> None:
        found = self.find(flag)
        if found is not None:
            i, m = found
            line = self.lines[i]
            if value is None:
                return
            sep = "=" if m.group(1) else " "  # keep --flag=value or --flag value
            new = f"{flag}{sep}{_quote(value)}"
            self.lines[i] = line[: m.start()] + new + line[m.end() :]
            return
        self.append(f"{flag} {_quote(value)}" if value is not None else flag)

    def append(self, text: str) -> None:
        last = self.lines[self.last]
        code, comment = _split_comment(last)
        if self.last == self.first or comment:
            # One-line command, or a comment at its end: add the flag on that line.
            self.lines[self.last] = code.rstrip() + f" {text}" + (f"  {comment}" if comment else "")
            return
        indent = re.match(r"[ \t]*", last)
        prefix = indent.group(0) if indent else "  "
        self.lines[self.last] = code.rstrip() + " \\"
        self.lines.insert(self.last + 1, prefix + text)
        self.last += 1

    def remove(self, flag: str) -> None:
        found = self.find(flag)
        if found is None:
            return
        i, m = found
        line = self.lines[i]
        rest = (line[: m.start()].rstrip(" \t") + " " + line[m.end() :].lstrip(" \t")).rstrip()
        if rest.strip() in ("", "\\"):
            del self.lines[i]
            self.last -= 1
            if i > self.last and self.last >= self.first:
                # The removed line ended the command: its predecessor must end it now.
                self.lines[self.last] = re.sub(r"\s*\\\s*$", "", self.lines[self.last])
        else:
            self.lines[i] = rest if not line.endswith("\\") or rest.endswith("\\") else rest + " \\"

    def replace(self, old: str, new: str, value: str | None) -> None:
        found = self.find(old)
        if found is None:
            self.set(new, value)
            return
        i, m = found
        line = self.lines[i]
        if value is None:
            self.lines[i] = line[: m.start()] + new + line[m.start() + len(old) :]
        else:
            sep = "=" if m.group(1) else " "
            self.lines[i] = line[: m.start()] + f"{new}{sep}{_quote(value)}" + line[m.end() :]


def _apply(cmd: _Command, edits: list[Edit]) -> None:
    for e in edits:
        if e.action == "set_flag":
            cmd.set(e.flag, e.value)
        elif e.action == "remove_flag":
            cmd.remove(e.flag)
        elif e.action == "replace_flag":
            cmd.replace(e.replaces or e.flag, e.flag, e.value)


def _join(lines: list[str], original: str) -> str:
    text = "\n".join(lines)
    return text + "\n" if original.endswith("\n") else text


def edit_shell(text: str, launch: LaunchArgs, edits: list[Edit]) -> str:
    """A shell script or systemd unit whose launch command spans `launch.command_lines`."""
    if launch.command_lines is None:
        raise FactError("the launch command's lines are unknown")
    lines = text.splitlines()
    first, last = launch.command_lines
    known = {ll.first for ll in logical_lines(text)}
    if first not in known or last > len(lines):
        raise FactError("the launch file changed since it was read")
    cmd = _Command(lines, first, last)
    _apply(cmd, edits)
    return _join(lines, text)


def _command_items(lines: list[str], start: int) -> list[int]:
    """Line indexes of the `- item` lines of the block list that starts after `start`."""
    items = []
    for i in range(start + 1, len(lines)):
        if re.match(r"\s*-\s", lines[i]):
            items.append(i)
        elif lines[i].strip() and not lines[i].lstrip().startswith("#"):
            break
    return items


def edit_compose(text: str, edits: list[Edit]) -> str:
    """A compose file whose SGLang service's `command:` is a block list (`- item` per line)."""
    lines = text.splitlines()
    items: list[int] = []
    for start, line in enumerate(lines):
        if re.match(r"\s*command:\s*$", line):
            candidate = _command_items(lines, start)
            # Only the service that runs SGLang: other services have commands too.
            if any("launch_server" in lines[i] for i in candidate):
                items = candidate
                break
    if not items:
        raise FactError(
            "no compose `command:` block list runs sglang.launch_server; edit it by hand"
        )
    indent = re.match(r"(\s*-\s+)", lines[items[0]])
    dash = indent.group(1) if indent else "  - "

    def value_of(i: int) -> str:
        raw = lines[i].split("-", 1)[1].strip()
        return raw.strip("'\"")

    def index_of(flag: str) -> int | None:
        for n, i in enumerate(items):
            if value_of(i) == flag:
                return n
        return None

    for e in edits:
        target = e.replaces if e.action == "replace_flag" and e.replaces else e.flag
        n = index_of(target)
        if e.action == "remove_flag":
            if n is None:
                continue
            drop = [items[n]]
            if n + 1 < len(items) and not value_of(items[n + 1]).startswith("-"):
                drop.append(items[n + 1])
            for i in reversed(drop):
                del lines[i]
            return edit_compose(_join(lines, text), edits[edits.index(e) + 1 :])
        if n is None:
            at = items[-1] + 1
            new = [f"{dash}{e.flag}"] + ([f'{dash}"{e.value}"'] if e.value is not None else [])
            lines[at:at] = new
            return edit_compose(_join(lines, text), edits[edits.index(e) + 1 :])
        lines[items[n]] = f"{dash}{e.flag}"
        if e.value is not None:
            if n + 1 < len(items) and not value_of(items[n + 1]).startswith("-"):
                lines[items[n + 1]] = f'{dash}"{e.value}"'
            else:
                lines.insert(items[n] + 1, f'{dash}"{e.value}"')
                return edit_compose(_join(lines, text), edits[edits.index(e) + 1 :])
    return _join(lines, text)


def edit_argv(argv: list[str], edits: list[Edit]) -> list[str]:
    """The new command line, for a launch with no writable source."""
    out = list(argv)

    def locate(flag: str) -> int | None:
        for i, a in enumerate(out):
            if a == flag or a.startswith(flag + "="):
                return i
        return None

    for e in edits:
        target = e.replaces if e.action == "replace_flag" and e.replaces else e.flag
        i = locate(target)
        if e.action == "remove_flag":
            if i is not None:
                has_value = (
                    "=" not in out[i] and i + 1 < len(out) and not out[i + 1].startswith("-")
                )
                del out[i : i + (2 if has_value else 1)]
            continue
        if i is None:
            out += [e.flag] + ([e.value] if e.value is not None else [])
            continue
        if "=" in out[i]:
            out[i] = (
                f"{e.flag}={e.value}" if e.value is not None else e.flag + out[i][len(target) :]
            )
        else:
            out[i] = e.flag
            if e.value is not None:
                if i + 1 < len(out) and not out[i + 1].startswith("-"):
                    out[i + 1] = e.value
                else:
                    out.insert(i + 1, e.value)
    return out


def edit_inventory_launch(text: str, host: str, new_argv: list[str]) -> str:
    """Rewrite one host's `launch:` entry in an inventory file, leaving every other line.

    The value keeps its form: a one-line string stays a string, a flow list `[a, b]` stays
    one, a block list keeps its indentation. Comments elsewhere are untouched.
    """
    import yaml

    lines = text.splitlines()
    hosts_at = next((i for i, ln in enumerate(lines) if re.match(r"hosts:\s*(#.*)?$", ln)), None)
    if hosts_at is None:
        raise FactError("inventory has no top-level `hosts:` block")
    host_re = re.compile(
        rf"(\s+)({re.escape(host)}|'{re.escape(host)}'|\"{re.escape(host)}\"):\s*(#.*)?$"
    )
    start = next((i for i in range(hosts_at + 1, len(lines)) if host_re.match(lines[i])), None)
    if start is None:
        one_line = _edit_flow_host(lines, hosts_at, host, new_argv)
        if one_line is None:
            raise FactError(f"inventory has no block for host {host!r}")
        out = _join(one_line, text)
        _check_inventory(out, host, new_argv)
        return out
    host_indent = len(lines[start]) - len(lines[start].lstrip())
    end = len(lines)
    for i in range(start + 1, len(lines)):
        stripped = lines[i].strip()
        outdented = len(lines[i]) - len(lines[i].lstrip()) <= host_indent
        if stripped and not stripped.startswith("#") and outdented:
            end = i
            break
    at = next((i for i in range(start + 1, end) if re.match(r"\s+launch:", lines[i])), None)
    if at is None:
        raise FactError(f"host {host!r} has no `launch:` entry")
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
    value = lines[at].split(":", 1)[1].strip()
    if value.startswith("["):
        flow = yaml.safe_dump(new_argv, default_flow_style=True, width=10**6).strip()
        lines[at] = f"{indent}launch: {flow}"
    elif value:
        lines[at] = (
            f"{indent}launch: "
            + yaml.safe_dump(shlex.join(new_argv), width=10**6).strip().removesuffix("...").strip()
        )
    else:
        # A block list: the items follow, indented deeper.
        item_end = at + 1
        while item_end < end and re.match(r"\s+-\s", lines[item_end]):
            item_end += 1
        dash = re.match(r"(\s+-\s+)", lines[at + 1]) if at + 1 < end else None
        prefix = dash.group(1) if dash else indent + "  - "
        items = [
            prefix + yaml.safe_dump(a, width=10**6).strip().removesuffix("...").strip()
            for a in new_argv
        ]
        lines[at + 1 : item_end] = items
    out = _join(lines, text)
    _check_inventory(out, host, new_argv)
    return out


def _check_inventory(out: str, host: str, new_argv: list[str]) -> None:
    import yaml

    check = yaml.safe_load(out)
    entry = check["hosts"][host]["launch"]
    got = shlex.split(entry) if isinstance(entry, str) else [str(x) for x in entry]
    if got != new_argv:
        raise FactError("could not rewrite the inventory's launch entry faithfully")


def _edit_flow_host(
    lines: list[str], hosts_at: int, host: str, new_argv: list[str]
) -> list[str] | None:
    """A host written in flow style on one line (`gpu-a: {launch: ..., labels: [x]}`)."""
    import yaml

    flow_re = re.compile(
        rf"(\s+)({re.escape(host)}|'{re.escape(host)}'|\"{re.escape(host)}\"):\s*(\{{.*\}})\s*(#.*)?$"
    )
    for i in range(hosts_at + 1, len(lines)):
        m = flow_re.match(lines[i])
        if not m:
            continue
        entry = yaml.safe_load(m.group(3))
        if not isinstance(entry, dict) or "launch" not in entry:
            return None
        entry["launch"] = (
            shlex.join(new_argv) if isinstance(entry["launch"], str) else list(new_argv)
        )
        body = yaml.safe_dump(entry, default_flow_style=True, width=10**6, sort_keys=False)
        comment = f"  {m.group(4)}" if m.group(4) else ""
        out = list(lines)
        out[i] = f"{m.group(1)}{m.group(2)}: {body.strip()}{comment}"
        return out
    return None
