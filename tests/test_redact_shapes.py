"""Issue 22: secret shapes that were still printed, each hidden by shape (names and values
as data in dflash_doctor/redact.py), and SGLang's own option names left readable."""

from __future__ import annotations

from pathlib import Path

import pytest

from dflash_doctor.errors import FactError, UsageError
from dflash_doctor.redact import redact_argv, redact_block, redact_lines, redact_text

JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJlMDEyMzQ1"
GOOGLE = "AIzaSyA1234567890abcdefghijklmnopqrstu"


@pytest.mark.parametrize(
    "text, secret",
    [
        ("--db-pass hunter2pw", "hunter2pw"),
        ("--hmac-key 00ffee11", "00ffee11"),
        ("--signing-key abcd1234", "abcd1234"),
        (f"--session {JWT}", JWT),
        (f"cookie jar holds {JWT} today", JWT),
        (f"GET https://maps.example/api?key={GOOGLE}&q=1", GOOGLE),
        ("https://b.s3.amazonaws.com/o?X-Amz-Algorithm=A&X-Amz-Signature=9f8e7d6c5b", "9f8e7d6c5b"),
        ("fetch /o?sig=Zm9vYmFy0123&se=2030", "Zm9vYmFy0123"),
        ("--api-key -dashsecret9 --tp 2", "dashsecret9"),
        ("DB_PASS=pw0rd123 passes=3", "pw0rd123"),
    ],
)
def test_secret_shapes_are_hidden(text: str, secret: str) -> None:
    assert secret not in redact_text(text)
    assert secret not in " ".join(redact_argv(text.split()))


def test_sglang_option_names_stay_readable() -> None:
    argv = [
        "--enable-streaming-session",
        "--tp",
        "2",
        "--enable-forward-pass-metrics",
        "--prefill-delayer-max-delay-passes",
        "4",
        "--api-key",
        "-x",
    ]
    assert redact_argv(argv)[:6] == argv[:6]
    text = "--enable-session-radix-cache --tp 2 --bypass-x y passes=4"
    assert redact_text(text) == text


def test_a_value_on_the_line_after_its_flag_in_a_diff() -> None:
    diff = (
        "@@ -1,5 +1,5 @@\n"
        " exec python -m sglang.launch_server \\\n"
        "   --db-pass \\\n"
        "-  oldsecret1 \\\n"
        "+  newsecret2 \\\n"
        "   --tp 2\n"
        "-  --hmac-key \\\n"
        "-  hmacsecret3 \\\n"
        "+  --hmac-key \\\n"
        "+  hmacsecret4 \\\n"
    )
    out = redact_block(diff)
    for secret in ("oldsecret1", "newsecret2", "hmacsecret3", "hmacsecret4"):
        assert secret not in out, out
    assert "+  --hmac-key \\\n" in out and "   --tp 2\n" in out
    # a YAML list keeps its next flag: only the value after a secret flag goes
    assert redact_lines(["- --api-key", "- s3cret", "- --tp", "- 2"]) == [
        "- --api-key",
        "- ***",
        "- --tp",
        "- 2",
    ]


def test_file_contents_quoted_in_error_messages(tmp_path: Path) -> None:
    assert "hunter2pw" not in str(FactError("line 3: cannot parse '--db-pass hunter2pw'"))
    from dflash_doctor.inventory import load_inventory

    inv = tmp_path / "inventory.yaml"
    inv.write_text(f"hosts:\n  gpu-a:\n    address: root@10.0.0.1:{GOOGLE}\n")
    with pytest.raises(UsageError) as err:
        load_inventory(str(inv))
    assert "bad port" in str(err.value) and GOOGLE not in str(err.value)


def test_error_messages_keep_their_host_and_path() -> None:
    """A message's leading host or path is not taken for a `NAME: value` secret."""
    for text in (
        "auth-gpu-1: timed out after 3s",
        "/run/secrets/token: no such file or directory",
        "token-svc.example: cannot connect: connection refused",
    ):
        assert str(FactError(text)) == text
    assert str(FactError("gpu-a: line 3 reads api_key: hunter2pw")).endswith("api_key: ***")
