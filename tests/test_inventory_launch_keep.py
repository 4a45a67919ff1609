"""Issue 22 item 10: `fix -I ... --apply` keeps the inventory `launch:` flags the declared
release's parser does not know, edits the entry in place, and shows the change whole."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

from dflash_doctor.fix.edits import Edit
from dflash_doctor.fix.word_edits import read_inline
from tests.cli_helper import doctor
from tests.conftest import DEMO_HOST

TOKEN = "hf_FAKEtokenFAKEtokenFAKE00"


def _inventory(tmp_path: Path) -> tuple[Path, str]:
    shutil.copytree(DEMO_HOST / "models/Kimi-K2.6-DFlash", tmp_path / "d")
    line = (
        f"python -m sglang.launch_server --model-path m --hf-token {TOKEN} "
        "--speculative-algorithm DFLASH --my-wrapper-flag 'two  words' "
        "--speculative-draft-model-path d --context-length 65536"
    )
    text = (
        "defaults:\n  sglang_version: 0.5.13\n  offline: true\n"
        f"  drafter_path: {tmp_path / 'd'}\n"
        "hosts:\n"
        f"  gpu-a:\n    launch: {line}\n"
        "  gpu-b:\n    launch:\n"
        + "".join(
            f"      - {w}\n"
            for w in [
                "python",
                "-m",
                "sglang.launch_server",
                "--model-path",
                "m",
                "--hf-token",
                TOKEN,
                "--my-wrapper-flag",
                "val",
                "--speculative-algorithm",
                "DFLASH",
                "--speculative-draft-model-path",
                "d",
            ]
        )
    )
    inv = tmp_path / "inventory.yaml"
    inv.write_text(text)
    return inv, line


def _fix(inv: Path, *args: str, columns: int = 200) -> subprocess.CompletedProcess[str]:
    return doctor("fix", "-I", str(inv), *args, columns=columns)


def test_apply_keeps_unknown_flags_in_place(tmp_path: Path) -> None:
    inv, line = _inventory(tmp_path)
    p = _fix(inv, "--apply", "--yes")
    assert p.returncode == 0, p.stdout + p.stderr
    text = inv.read_text()
    # the string entry: edited in place, every other word spelled as it was
    assert f"    launch: {line} --speculative-draft-window-size 2048\n" in text
    hosts = yaml.safe_load(text)["hosts"]
    block = hosts["gpu-b"]["launch"]
    assert block[5:9] == ["--hf-token", TOKEN, "--my-wrapper-flag", "val"]
    assert block[-2:] == ["--speculative-draft-window-size", "2048"]
    # the flags kept are named for the user, never dropped silently
    assert "remove --hf-token" in p.stdout and "remove --my-wrapper-flag" in p.stdout
    assert TOKEN not in p.stdout + p.stderr


def test_diff_shows_the_whole_line_at_a_narrow_width(tmp_path: Path) -> None:
    inv, _ = _inventory(tmp_path)
    p = _fix(inv, "--limit", "gpu-a", columns=60)
    assert p.returncode == 0, p.stdout + p.stderr
    flat = "".join(p.stdout.split())
    # the unknown flags and the new one are all on screen, not cropped at 60 columns
    assert "--my-wrapper-flag'two words'".replace(" ", "") in flat
    assert (
        "--hf-token***" in flat
        and "--context-length65536--speculative-draft-window-size2048" in flat
    )
    assert TOKEN not in p.stdout


def test_inline_reading_keeps_each_words_spelling() -> None:
    from dflash_doctor.fix.edits import edit_words
    from dflash_doctor.fix.word_edits import quote_shell

    text = "run --a 'x  y' --b \"$HOME\" --c=1"
    out = edit_words(text, [Edit("set_flag", "--c", "2")], read_inline, quote_shell)
    assert out == "run --a 'x  y' --b \"$HOME\" --c=2"
    out = edit_words(text, [Edit("remove_flag", "--a")], read_inline, quote_shell)
    assert out == 'run --b "$HOME" --c=1'
