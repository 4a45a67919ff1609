from __future__ import annotations

from dflash_doctor.redact import redact_argv, redact_text


def test_argv_forms() -> None:
    argv = [
        "--api-key",
        "s3cret",
        "--hf-token=abc",
        "HF_TOKEN=xyz",
        "--admin-api-key",
        "k",
        "--speculative-num-draft-tokens",
        "16",
        "--tokenizer-path",
        "/t",
        "--password",
        "p",
    ]
    out = redact_argv(argv)
    joined = " ".join(out)
    for secret in ("s3cret", "abc", "xyz", " k ", " p"):
        assert secret not in joined + " "
    assert out[out.index("--speculative-num-draft-tokens") + 1] == "16"
    assert out[out.index("--tokenizer-path") + 1] == "/t"


def test_token_shapes_anywhere() -> None:
    assert "hf_" not in redact_argv(["--model", "x", "hf_abcdefghijklmnopqrstuvwxyz"])[2]


def test_text() -> None:
    text = (
        "server_args=ServerArgs(api_key='sk-live', admin_api_key=None, mask_token=<|MASK|>, "
        "speculative_num_draft_tokens=16) Authorization: Bearer abc.def"
    )
    out = redact_text(text)
    assert "sk-live" not in out and "abc.def" not in out
    assert "admin_api_key=None" in out and "mask_token=<|MASK|>" in out
    assert "speculative_num_draft_tokens=16" in out


def test_a_variable_reference_is_shown_as_written_secrets_stay_hidden() -> None:
    """`"$SGLANG_API_KEY"` names where the key is, it is not the key (issue 23): shown as the
    launch file writes it. A value with anything more than the reference stays hidden."""
    from dflash_doctor.redact import redact_lines, shell_with_placeholders

    argv = ["--api-key", "$SGLANG_API_KEY", "--api-key=${KEY}", "--token", '"$HF_TOKEN"']
    assert redact_argv(argv) == argv
    hidden = ["--api-key", "${KEY:-sk-real}", "--api-key", "$A$B", "--password=sk-$X"]
    assert redact_argv(hidden) == ["--api-key", "***", "--api-key", "***", "--password=***"]
    text = '--api-key "$SGLANG_API_KEY" api_key=${X} --api-key s3cret password: "$P" --token $A$B'
    out = redact_text(text)
    assert '--api-key "$SGLANG_API_KEY" api_key=${X}' in out and 'password: "$P"' in out
    assert "s3cret" not in out and "$A$B" not in out
    lines = ["  --api-key \\", '  "$SGLANG_API_KEY" \\', "  --api-key \\", "  s3cret \\", "  x"]
    assert redact_lines(lines) == [*lines[:3], "  *** \\", "  x"]
    assert redact_text('Environment="SGLANG_API_KEY=sk-fixture-secret-0000"') == (
        'Environment="SGLANG_API_KEY=***"'
    )
    # the start line expands the reference (a quoted '$KEY' would pass the text itself)
    line, names = shell_with_placeholders(redact_argv(["sglang", "--api-key", "$SGLANG_API_KEY"]))
    assert line == 'sglang --api-key "${SGLANG_API_KEY}"' and names == ["SGLANG_API_KEY"]


def test_the_demo_diff_shows_the_key_variable_not_stars() -> None:
    import subprocess
    import sys

    from tests.conftest import REPO

    p = subprocess.run(
        [sys.executable, "-m", "dflash_doctor", "fix", "--demo"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert p.returncode == 0 and '+  --api-key "$SGLANG_API_KEY" \\' in p.stdout, p.stdout
    assert "***" not in p.stdout
