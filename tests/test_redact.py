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
