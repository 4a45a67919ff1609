"""Edit a launch source in place, keeping its comments, layout and variables.

Pure text in, text out. Shell scripts and systemd units: the launch command is one logical
line (backslash continuations); a flag is changed where it stands, a new flag goes on a new
continuation line indented like its neighbours. Compose files: `command:` lists.
"""

from __future__ import annotations

import re
import shlex

from dflash_doctor.errors import FactError
from dflash_doctor.facts.models import LaunchArgs
from dflash_doctor.facts.shell import placeholders
from dflash_doctor.fix import word_edits as wd
from dflash_doctor.fix.compose_edits import edit_command

# Re-exported: what an edit is lives below `check` and `fix` both (launch_edits.py).
from dflash_doctor.launch_edits import EDITABLE as EDITABLE
from dflash_doctor.launch_edits import Edit as Edit
from dflash_doctor.launch_edits import edit_argv as edit_argv
from dflash_doctor.redact import redact_argv


def _edit_one(text: str, r: wd.Reading, e: Edit, quote: wd.Quote) -> str:
    """One edit on the words of `r`, with edit_argv's rules (its first match, its value test)."""
    target = e.replaces if e.action == "replace_flag" and e.replaces else e.flag
    words = r.words
    i = wd.locate(words, target)
    if e.action == "remove_flag":
        if i is None:
            return text
        has_value = "=" not in words[i] and i + 1 < len(words) and not words[i + 1].startswith("-")
        return wd.remove_words(text, r, i, i + int(has_value))
    if i is None:
        new = [e.flag] + ([e.value] if e.value is not None else [])
        return wd.append_words(text, r, " ".join(quote(w) for w in new))
    if "=" in words[i]:
        if e.value is None:
            return wd.rename_flag(text, r, i, target, e.flag)
        return wd.replace_word(text, r, i, quote(f"{e.flag}={e.value}"))
    if e.value is not None:
        if i + 1 < len(words) and not words[i + 1].startswith("-"):
            if words[i + 1] != e.value:
                text = wd.replace_word(text, r, i + 1, quote(e.value))
        else:
            text = wd.insert_after(text, r, i, quote(e.value))
    return text if words[i] == e.flag else wd.replace_word(text, r, i, quote(e.flag))


def first_difference(got: list[str], want: list[str]) -> str:
    """Where two argvs part, redacted and with lost expansions shown as `${NAME}`."""
    got_s, want_s = (
        redact_argv([placeholders(w) for w in got]),
        redact_argv([placeholders(w) for w in want]),
    )
    n = next((k for k, (a, b) in enumerate(zip(got_s, want_s, strict=False)) if a != b), None)
    if n is None:
        return f"{len(got_s)} words where the plan has {len(want_s)}"
    return f"word {n + 1} reads {got_s[n]!r} where the plan has {want_s[n]!r}"


def edit_words(text: str, edits: list[Edit], read: wd.Reader, quote: wd.Quote) -> str:
    """Make `edits` on the launch command `read` finds in `text`, then read the result back
    the same way: its argv must be edit_argv's of the one read before, and everything else
    in the file must read the same; otherwise FactError (nothing is written)."""
    before = read(text)
    out = text
    for e in edits:
        out = _edit_one(out, read(out), e, quote)
    try:
        after = read(out)
    except FactError as err:
        raise FactError(f"refused: the edited file would not read back ({err})") from None
    promised = edit_argv(before.words, edits)
    if after.words != promised:
        raise FactError(
            f"refused: the edited file would not run the planned command "
            f"({first_difference(after.words, promised)}); edit it by hand"
        )
    if after.others != before.others:
        raise FactError("refused: the edit would change another command of the file")
    return out


def edit_shell(text: str, launch: LaunchArgs, edits: list[Edit]) -> str:
    """A shell script or systemd unit (`launch.kind`) with `edits` made on its launch
    command, proved by reading it back (fix/word_edits.py)."""
    if launch.kind == "systemd":
        return edit_words(text, edits, wd.read_unit, wd.quote_systemd)
    return edit_words(text, edits, wd.read_script, wd.quote_shell)


def _join(lines: list[str], original: str) -> str:
    text = "\n".join(lines)
    return text + "\n" if original.endswith("\n") else text


def edit_compose(text: str, edits: list[Edit], service: str | None = None) -> str:
    """A compose file whose SGLang service's `command:` (a list or a string) gets `edits`,
    proved by loading the result (fix/compose_edits.py)."""
    return edit_command(text, lambda argv: edit_argv(argv, edits), service)


def edit_inventory_launch(
    text: str, host: str, new_argv: list[str], *, line: str | None = None
) -> str:
    """Rewrite one host's `launch:` entry in an inventory file, leaving every other line.

    The value keeps its form: a one-line string stays a string (`line`, when given: the
    string edited in place, its other words spelled as they were), a flow list `[a, b]`
    stays one, a block list keeps its indentation. Comments elsewhere are untouched.
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
        one_line = _edit_flow_host(lines, hosts_at, host, new_argv, line)
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
            + yaml.safe_dump(line if line is not None else shlex.join(new_argv), width=10**6)
            .strip()
            .removesuffix("...")
            .strip()
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
    lines: list[str], hosts_at: int, host: str, new_argv: list[str], line: str | None
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
            (line if line is not None else shlex.join(new_argv))
            if isinstance(entry["launch"], str)
            else list(new_argv)
        )
        body = yaml.safe_dump(entry, default_flow_style=True, width=10**6, sort_keys=False)
        comment = f"  {m.group(4)}" if m.group(4) else ""
        out = list(lines)
        out[i] = f"{m.group(1)}{m.group(2)}: {body.strip()}{comment}"
        return out
    return None
