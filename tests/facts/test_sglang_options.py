"""The per-release option data and the offline replay of SGLang's parser.

Every expectation here was read in the published wheels (/work/wheels/src/<version>/sglang);
the data itself is generated from them by scripts/gen_sglang_options.py.
"""

from __future__ import annotations

import pytest

from dflash_doctor.errors import FactError
from dflash_doctor.facts import sglang_options as so
from dflash_doctor.facts.launch import parse_script, replay_launch

ALL = [
    "0.5.11",
    "0.5.12",
    "0.5.12.post1",
    "0.5.13",
    "0.5.13.post1",
    "0.5.14",
    "0.5.15",
    "0.5.15.post1",
    "0.5.16",
    "0.5.17",
    "0.5.18",
    "0.5.19",
    "0.5.20",
    "0.5.21",
    "0.5.22",
    "0.5.23",
]


def run(version: str, *args: str, serve: bool = False, **kw: object) -> so.Replay:
    return so.replay(["--model-path", "m", *args], version, serve=serve, **kw)  # type: ignore[arg-type]


def test_every_release_is_in_the_data() -> None:
    assert so.releases() == tuple(ALL)
    for v in ALL:
        info = so.release_info(v)
        # prepare_server_args: argparse.ArgumentParser(prog="sglang serve") in every release
        # (srt/server_args.py:7276 in 0.5.11, :679 in 0.5.23), allow_abbrev left True.
        assert info["parser"]["prog"] == "sglang serve"
        assert "allow_abbrev" not in info["parser"]
        assert len(so.options_of(v)) > 350


def test_custom_types_match_the_sources_they_were_written_for() -> None:
    """A release that changes one of SGLang's `type=` callables fails here, so that the
    re-implementation in facts/sglang_options.py is re-read against it."""
    for v in ALL:
        for name, entry in so.release_info(v)["type_sources"].items():
            expected = so.TYPE_SOURCES[name]
            digest = entry.split()[0]
            assert digest in (expected if isinstance(expected, tuple) else (expected,)), (v, name)
        types = {i.raw.get("type") for i in so.options_of(v)} - {None}
        assert types <= set(so.TYPES), (v, types - set(so.TYPES))
        merger = so.release_info(v)["config_merger"].split()[0]
        assert merger in so.CONFIG_MERGERS, (v, merger)


@pytest.mark.parametrize("version", ["0.5.20", "0.5.23"])
def test_cuda_graph_max_bs_is_ambiguous_from_0_5_20(version: str) -> None:
    """0.5.20+ has --cuda-graph-max-bs-decode and --cuda-graph-max-bs-prefill and no
    --cuda-graph-max-bs (the alias at srt/server_args.py:3928 in 0.5.19 is gone)."""
    r = run(version, "--cuda-graph-max-bs", "32")
    assert r.error_line == (
        "sglang serve: error: ambiguous option: --cuda-graph-max-bs could match "
        "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"
    )


@pytest.mark.parametrize("version", ["0.5.14", "0.5.19"])
def test_cuda_graph_max_bs_is_a_deprecated_alias_0_5_14_to_0_5_19(version: str) -> None:
    """DeprecatedAliasStoreAction(new_flag="--cuda-graph-max-bs-decode"): 0.5.14
    srt/server_args.py:6358, 0.5.19 srt/server_args.py:3928; the warning text is
    arg_groups/argparse_actions.py DeprecatedAliasStoreAction.__call__."""
    r = run(version, "--cuda-graph-max-bs", "32")
    assert r.error is None and r.values["cuda_graph_max_bs_decode"] == 32
    (used,) = [u for u in r.used if u.option == "--cuda-graph-max-bs"]
    assert used.info.kind == "DeprecatedAliasStoreAction"
    assert used.info.warning == (
        "'{option}' is deprecated and will be removed in a future release. "
        "Use '--cuda-graph-max-bs-decode' instead."
    )


def test_cuda_graph_max_bs_is_plain_before_0_5_14() -> None:
    """0.5.13 srt/server_args.py:6506: a plain int option."""
    r = run("0.5.13", "--cuda-graph-max-bs", "32")
    assert r.error is None and r.values["cuda_graph_max_bs"] == 32


def test_mamba_scheduler_strategy() -> None:
    """Plain in 0.5.13 (srt/server_args.py:6224), an alias of --mamba-radix-cache-strategy
    0.5.14-0.5.19 (0.5.19 srt/server_args.py:3919), unrecognized from 0.5.20."""
    assert run("0.5.13", "--mamba-scheduler-strategy", "no_buffer").error is None
    r = run("0.5.19", "--mamba-scheduler-strategy", "no_buffer")
    assert r.values["mamba_radix_cache_strategy"] == "no_buffer"
    for v in ("0.5.20", "0.5.23"):
        r = run(v, "--mamba-scheduler-strategy", "no_buffer")
        assert r.error == "unrecognized arguments: --mamba-scheduler-strategy no_buffer"


def test_context_length_takes_suffixes_in_every_release() -> None:
    """type=human_readable_int (srt/utils/common.py, the same source in 0.5.11-0.5.23)."""
    for v in ALL:
        assert run(v, "--context-length", "32k").values["context_length"] == 32000
    assert run("0.5.23", "--context-length", "128Ki").values["context_length"] == 131072
    r = run("0.5.23", "--context-length", "lots")
    assert r.error is not None and r.error.startswith(
        "argument --context-length: Invalid integer value: 'lots'."
    )


def test_abbreviations_and_aliases_resolve_as_in_sglang() -> None:
    """--speculative-draft-model is the second option string of --speculative-draft-model-path
    (0.5.11 srt/server_args.py:5370); argparse's default allow_abbrev resolves unique prefixes."""
    r = run("0.5.23", "--speculative-draft-model", "d", "--speculative-draft-window", "64")
    assert r.error is None
    assert r.values["speculative_draft_model_path"] == "d"
    assert r.values["speculative_draft_window_size"] == 64
    written = {u.written: u.option for u in r.used}
    assert written["--speculative-draft-window"] == "--speculative-draft-window-size"
    assert run("0.5.23", "--enable-dflash-magic").error == (
        "unrecognized arguments: --enable-dflash-magic"
    )


def test_window_flag_per_release() -> None:
    """0.5.11: only --speculative-dflash-draft-window-size (srt/server_args.py:5417);
    0.5.12: both spellings on one action (:5872); 0.5.13-0.5.19 the old one a deprecated
    alias (0.5.13 :5921); 0.5.20 removed."""
    assert run("0.5.11", "--speculative-draft-window-size", "8").error is not None
    assert run("0.5.11", "--speculative-dflash-draft-window-size", "8").error is None
    r = run("0.5.13", "--speculative-dflash-draft-window-size", "4096")
    assert r.values["speculative_draft_window_size"] == 4096
    assert r.used[-1].info.kind == "DeprecatedAliasStoreAction"
    assert run("0.5.20", "--speculative-dflash-draft-window-size", "8").error is not None


def test_sglang_serve_positional_model_from_0_5_16() -> None:
    """cli/serve.py `_normalize_positional_model_path` exists from 0.5.16; `--model-type` is
    dropped before parsing in every release (`_extract_model_type_override`)."""
    r = so.replay(["Qwen/Qwen3-8B", "--model-type", "llm", "--tp", "2"], "0.5.16", serve=True)
    assert r.error is None and r.values["model_path"] == "Qwen/Qwen3-8B"
    r = so.replay(["Qwen/Qwen3-8B", "--tp", "2"], "0.5.15", serve=True)
    assert r.error == "the following arguments are required: --model-path/--model"
    r = so.replay(["--model-path", "m", "--model-type"], "0.5.23", serve=True)
    assert r.error == "Error: --model-type requires a value."


def test_config_yaml_is_merged_before_the_command_line() -> None:
    """srt/utils/server_args_config_parser.py (0.5.19+; srt/ before): config args first, then
    the command line, so the command line wins; store_true keys become bare flags."""
    files = {
        "/etc/sglang/a.yaml": b"context-length: 8k\ntrust-remote-code: true\ntp-size: 4\n",
        "/etc/sglang/dict.yaml": b"json-model-override-args: {a: 1}\n",
    }
    r = so.replay(
        ["--config", "/etc/sglang/a.yaml", "--model-path", "m", "--tp-size", "8"],
        "0.5.23",
        read=files.__getitem__,
    )
    assert r.error is None
    assert r.values["context_length"] == 8000 and r.values["trust_remote_code"] is True
    assert r.values["tp_size"] == 8
    # 0.5.14+ passes dicts as JSON; 0.5.11-0.5.13 as Python's str(dict) (`_add_scalar_arg`)
    ok = so.replay(
        ["--config", "/etc/sglang/dict.yaml", "--model-path", "m"], "0.5.14", read=files.__getitem__
    )
    assert ok.values["json_model_override_args"] == '{"a": 1}'
    old = so.replay(
        ["--config", "/etc/sglang/dict.yaml", "--model-path", "m"], "0.5.13", read=files.__getitem__
    )
    assert old.values["json_model_override_args"] == "{'a': 1}"
    # the merger writes f"--{key}" with the key as written (`_add_scalar_arg`,
    # `_add_boolean_arg`): an underscore key becomes an option argparse does not know
    files["/u.yaml"] = b"trust_remote_code: true\n"
    under = so.replay(
        ["--config", "/u.yaml", "--model-path", "m"], "0.5.23", read=files.__getitem__
    )
    assert under.error == "unrecognized arguments: --trust_remote_code"
    bad = so.replay(["--config", "c.json", "--model-path", "m"], "0.5.23", read=files.__getitem__)
    assert bad.error == "ValueError: Config file must be YAML format, got: .json"


def test_config_keys_of_a_shared_dest() -> None:
    """0.5.14-0.5.22 key the unsupported actions by dest, so a YAML key
    `cuda-graph-max-bs-decode` (its dest shared with the DeprecatedAliasStoreAction) is refused;
    0.5.23 keys by every long spelling and keeps it usable
    (srt/utils/server_args_config_parser.py:17-65 in 0.5.23)."""
    files = {"/c.yaml": b"cuda-graph-max-bs-decode: 16\n"}
    r = so.replay(["--config", "/c.yaml", "--model-path", "m"], "0.5.19", read=files.__getitem__)
    assert r.error == (
        "ValueError: Unsupported config option 'cuda_graph_max_bs_decode' with action "
        "'DeprecatedAliasStoreAction'"
    )
    r = so.replay(["--config", "/c.yaml", "--model-path", "m"], "0.5.23", read=files.__getitem__)
    assert r.error is None and r.values["cuda_graph_max_bs_decode"] == 16


def test_unknown_versions_take_the_nearest_earlier_release() -> None:
    assert so.release_for("0.5.23") == ("0.5.23", None)
    release, note = so.release_for("0.5.24rc1")
    assert release == "0.5.23" and note is not None and "newer" in note
    release, note = so.release_for("0.5.13.post3")
    assert release == "0.5.13.post1" and note is not None
    assert so.release_for("0.5.10")[0] is None
    assert so.release_for("banana")[0] is None


def test_replay_launch_fills_launch_args() -> None:
    args = parse_script(
        b"exec python -m sglang.launch_server --model m --speculative-algorithm DFLASH "
        b"--speculative-draft-model /d --speculative-draft-window 2048 --context-length 64k "
        b"--cuda-graph-max-bs 16\n",
        source="s",
    )
    assert args.draft_window_size is None  # the fallback parser does not guess
    replayed = replay_launch(args, "0.5.19")
    assert (replayed.parser, replayed.parser_version) == ("replay", "0.5.19")
    assert replayed.draft_model_path == "/d" and replayed.context_length == 64000
    assert replayed.draft_window_flag == "--speculative-draft-window-size"
    assert replayed.draft_window_size == 2048 and replayed.cuda_graph_max_bs == 16
    refused = replay_launch(args, "0.5.23")
    assert refused.sglang_rejects is not None and "ambiguous option" in refused.sglang_rejects
    newer = replay_launch(args, "0.5.30")
    assert newer.parser_version == "0.5.23" and any("newer" in n for n in newer.parser_notes)


def test_config_read_failure_keeps_the_fallback_with_a_reason() -> None:
    args = parse_script(
        b"python -m sglang.launch_server --config /etc/x.yaml --model-path m\n", source="s"
    )

    def unreadable(path: str) -> bytes:
        raise FactError(f"cannot read {path}")

    kept = replay_launch(args, "0.5.23", unreadable)
    assert kept.parser == "fallback"
    assert any("cannot read /etc/x.yaml" in n for n in kept.parser_notes)


@pytest.mark.parametrize(
    "data",
    [
        b"[1, 2]\n",
        b"a: [" * 2000,
        b"\xff\xfe",
        b"&a [*a]\n",
        b"- " * 100_000,
        # billion laughs: nine levels of nine aliases
        b"l0: &l0 [x, x, x, x, x, x, x, x, x]\n"
        + b"".join(
            b"l%d: &l%d [*l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d]\n"
            % (i, i, *([i - 1] * 9))
            for i in range(1, 10)
        ),
    ],
)
def test_hostile_config_files(data: bytes) -> None:
    r = None
    try:
        r = so.replay(["--config", "/c.yaml", "--model-path", "m"], "0.5.23", read=lambda p: data)
    except FactError:
        return
    assert r.error is not None
