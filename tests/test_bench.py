"""`bench`, `fix --apply --bench`, `check --bench` and the runtime facts, end to end over the
real sshd against the stand-in server (fixtures/fake_sglang), plus the pure parts.

SGLang facts the stand-in and the tool rely on (each cited in the code that uses it):
/server_info and /get_server_info in every release (srt/entrypoints/http_server.py
0.5.11:621,631; 0.5.23:853,863), /flush_cache (0.5.11:762; 0.5.23:1025), `meta_info`
`spec_accept_length` = completion_tokens / spec_verify_ct (managers/tokenizer_manager.py
0.5.11:2104-2110; 0.5.23:3166-3172), `sglang:num_running_reqs` (observability/
metrics_collector.py 0.5.11:201; 0.5.23:365), Bearer auth with /health and /metrics open
(utils/auth.py 0.5.11:100,103).

Per release (read in /work/wheels/src/<ver>/sglang/srt): http_server.py lines of
`@app.get("/get_server_info")`/`@app.get("/server_info")`, `/flush_cache`,
`/set_internal_state`, `/generate`; metrics_collector.py line of `sglang:spec_accept_length`;
tokenizer_manager.py line of `meta_info["spec_accept_length"]`:

    0.5.11  621/631 762 677 702 297 2104     0.5.16  733/743 905 797 829 417 2415
    0.5.12  620/630 761 676 701 341 2131     0.5.17  771/781 946 838 870 417 2767
    0.5.13  627/637 788 689 714 415 2297     0.5.18  786/796 966 858 890 416 2793
    0.5.14  678/688 839 740 765 415 2329     0.5.19  801/811 980 872 904 425 2813
    0.5.15  695/705 862 759 786 415 2362     0.5.20  808/818 990 882 914 427 2950
    0.5.21  831/841 987 879 911 429 2978     0.5.22  837/847 1009 881 913 504 3163
    0.5.23  853/863 1025 897 929 512 3166    (post releases: as their base release)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from dflash_doctor.bench.compare import compare
from dflash_doctor.bench.matrix import BenchOptions, plan_matrix
from dflash_doctor.checks.views import SPAN_CHECKS
from dflash_doctor.errors import UsageError
from dflash_doctor.facts.models import (
    BenchCell,
    BenchRequest,
    BenchResult,
    Fact,
    ServerRuntime,
)
from dflash_doctor.facts.runtime import parse_runtime, server_address
from dflash_doctor.on_host.server_http import parse_prometheus, prompt, scrub
from fixtures.sshd import free_port
from fixtures.stand_in import copy_models, install_stand_in
from tests.cli_helper import doctor as run_doctor
from tests.conftest import drafter_cfg, host_facts, launch, target_cfg

SECRET = "sk-bench-fixture-secret-0123456789"
SMALL = ["--bench-contexts", "512,16384", "--bench-concurrency", "1,2"]
SMALL += ["--bench-max-new-tokens", "32"]


# -- pure parts -------------------------------------------------------------------------------


def runtime(**args: object) -> ServerRuntime:
    return ServerRuntime(url="http://127.0.0.1:30000", endpoint="/server_info", args=args)


def test_default_matrix_straddles_the_window_and_is_capped() -> None:
    facts = host_facts(drafter=drafter_cfg(), target=target_cfg(), launch_args=launch())
    facts = facts.model_copy(
        update={
            "runtime": Fact.of(
                runtime(context_length=8192, max_req_input_len=8191, max_running_requests=8)
            ),
        }
    )
    m = plan_matrix(facts, BenchOptions(max_new_tokens=64))
    # 0.25x..8x of the 2048 window, capped at 8192 - 64 - 1
    assert m.contexts == [512, 2048, 4096, 8127]
    assert m.concurrency == [1, 4, 8]  # 16 capped by max running requests
    assert m.temperatures == [0.0, 1.0]  # greedy and SGLang's default temperature
    assert m.vocab == 163840 and m.window == 2048
    # greedy and T=1, code and prose (the default content), 3 repeats each
    assert [p.kind for p in m.prompts] == ["code", "prose"] and m.repeats == 3
    per_sweep = sum(c * (x + 64) for x in m.contexts for c in m.concurrency)
    assert m.tokens_sent == per_sweep * 2 * 2 * 3
    assert len(m.cells()) == 4 * 3 * 2 * 2


def test_matrix_refuses_sweeps_over_the_token_bound() -> None:
    facts = host_facts(drafter=drafter_cfg(), target=target_cfg(), launch_args=launch())
    with pytest.raises(UsageError, match="over --max-total-tokens"):
        plan_matrix(facts, BenchOptions(max_total_tokens=10_000))


def test_prompts_are_seeded_random_ids_over_the_vocabulary() -> None:
    a = prompt("s/512", 0, 512, 1000)
    assert a == prompt("s/512", 0, 512, 1000) and a != prompt("s/512", 1, 512, 1000)
    assert all(0 <= i < 1000 for i in a) and len(set(a)) > 300  # no repeated short text


def cell(ctx: int, length: float | list[float], temp: float = 0.0) -> BenchCell:
    """A cell whose repeats measured these accept lengths (one value: three equal repeats)."""
    values = length if isinstance(length, list) else [length] * 3
    reqs = [
        BenchRequest(
            completion_tokens=6400,
            spec_verify_ct=round(6400 / v),
            spec_accept_length=6400 / round(6400 / v),
            repeat=i,
        )
        for i, v in enumerate(values)
    ]
    return BenchCell(
        context=ctx, concurrency=1, temperature=temp, max_new_tokens=6400, requests=reqs,
        prompts="code", repeats=len(values),
    )  # fmt: skip


def sweep(lengths: dict[int, float | list[float]]) -> BenchResult:
    return BenchResult(
        host="h",
        window=2048,
        seed="s",
        vocab=10,
        contexts=sorted(lengths),
        concurrency=[1],
        temperatures=[0.0],
        max_new_tokens=64,
        cells=[cell(c, v) for c, v in lengths.items()],
    )


def test_compare_keeps_a_fix_that_helps_beyond_the_window() -> None:
    v = compare(sweep({512: 4.0, 8192: 2.0}), sweep({512: 4.0, 8192: 4.0}))
    assert v.keep and "within noise" in v.reason and "1 better" in v.reason


def test_compare_rejects_a_loss_beyond_the_window_over_the_threshold() -> None:
    v = compare(sweep({512: 4.0, 8192: 4.0}), sweep({512: 4.0, 8192: 3.5}))
    assert not v.keep and "worse by more than 5 %" in v.reason
    assert "code 8192 tokens x 1 at T=0" in v.reason
    assert compare(sweep({512: 4.0, 8192: 4.0}), sweep({512: 4.0, 8192: 3.9})).keep


def test_compare_rejects_a_change_inside_the_window() -> None:
    v = compare(sweep({512: 4.0, 8192: 2.0}), sweep({512: 3.0, 8192: 4.0}))
    assert not v.keep and "changed beyond the noise" in v.reason


def test_overlapping_intervals_are_no_change_never_a_verdict() -> None:
    # A 20 % drop beyond the window, but the repeats spread so wide that the 95 %
    # intervals overlap: no change, the fix is kept; the same drop measured tightly is not.
    wide = compare(sweep({8192: [3.0, 5.0, 4.0]}), sweep({8192: [2.4, 4.0, 3.2]}))
    assert wide.keep and wide.cells[0].change == "no change"
    assert wide.cells[0].before_lo < wide.cells[0].after_hi
    tight = compare(sweep({8192: [3.98, 4.02, 4.0]}), sweep({8192: [3.19, 3.21, 3.2]}))
    assert not tight.keep and tight.cells[0].change == "worse"


def test_interval_is_student_t_over_repeats() -> None:
    from dflash_doctor.facts.bench_stats import cell_interval, interval, request_weighted

    i = interval([1.0, 2.0, 3.0])
    assert i is not None and i.mean == 2.0 and i.n == 3
    assert abs((i.hi - i.mean) - 4.303 * 1.0 / 3**0.5) < 1e-9  # t(0.975, 2) * sd / sqrt(n)
    c = cell(512, [2.0, 3.0, 4.0])
    ci = cell_interval(c)
    assert ci is not None and ci.n == 3 and ci.lo < 3.0 < ci.hi
    # token- and request-weighted means differ when answers differ in length
    rows = [
        BenchRequest(completion_tokens=100, spec_verify_ct=50, spec_accept_length=2.0),
        BenchRequest(completion_tokens=10, spec_verify_ct=1, spec_accept_length=10.0),
    ]
    assert request_weighted(rows) == 6.0
    pooled = BenchCell(context=1, concurrency=2, temperature=0, max_new_tokens=100, requests=rows)
    assert pooled.accept_length == 110 / 51


def test_prometheus_samples_and_scrubbed_server_info() -> None:
    text = (
        "# TYPE sglang:num_running_reqs gauge\n"
        'sglang:num_running_reqs{model_name="m",engine_type="unified"} 3.0\n'
        'sglang:spec_accept_length{model_name="m"} 3.25\nother_metric 1\n'
        "sglang:bad NaN\n"
    )
    samples = parse_prometheus(text)
    assert samples["sglang:num_running_reqs"][0] == {
        "labels": {"model_name": "m", "engine_type": "unified"},
        "value": 3.0,
    }
    assert set(samples) == {"sglang:num_running_reqs", "sglang:spec_accept_length"}
    body = scrub({"api_key": SECRET, "admin_api_key": None, "hf_token": "x", "max_new_tokens": 5})
    assert body == {"admin_api_key": None, "max_new_tokens": 5}
    rt = parse_runtime(
        {
            "endpoint": "/server_info",
            "body": {
                "context_length": 4096,
                "version": "0.5.14",
                "internal_states": [
                    {"avg_spec_accept_length": 3.5, "memory_usage": {"kvcache": 4.0}}
                ],
            },
        },
        {"samples": samples},
        "http://127.0.0.1:1",
    )
    assert rt.version == "0.5.14" and rt.arg("context_length") == 4096
    assert rt.avg_spec_accept_length == 3.5 and rt.metric("sglang:num_running_reqs") == 3.0
    assert rt.internal_states[0]["memory_usage"] == {"kvcache": 4.0}
    launch_command = "python -m sglang.launch_server --ssl-keyfile-password hunter2 --port 1"
    rt = parse_runtime(
        {"endpoint": "/server_info", "body": {"launch_command": launch_command}}, {}, "u"
    )
    assert "hunter2" not in str(rt.args) and "--port 1" in str(rt.args["launch_command"])


def test_server_address_from_the_launch() -> None:
    assert server_address(launch("--port", "31000", "--host", "0.0.0.0")) == ("127.0.0.1", 31000)
    assert server_address(launch("--port=31001", "--host=10.0.0.5")) == ("10.0.0.5", 31001)
    assert server_address(None, "http://127.0.0.1:8080/health") == ("127.0.0.1", 8080)


def test_api_key_is_read_from_the_process_not_the_command_line(tmp_path: Path) -> None:
    from dflash_doctor.on_host.server_http import api_keys

    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "--api-key", SECRET])
    try:
        time.sleep(0.2)
        assert api_keys(p.pid) == (SECRET, None)
    finally:
        p.kill()
        p.wait()


# -- live: the stand-in over the real sshd ------------------------------------------------------


def healthy(port: int) -> bool:
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).read()
        return True
    except OSError:
        return False


def pids_on(port: int) -> list[int]:
    """The stand-in processes this test started: their command line names the port."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"sglang.launch_server" in argv and str(port).encode() in argv:
            found.append(int(entry))
    return found


@pytest.fixture
def stand_in(tmp_path: Path, sshd):  # type: ignore[no-untyped-def]
    port = free_port()
    models = copy_models(tmp_path / "models")
    script = tmp_path / "serve.sh"
    log = tmp_path / "server.log"

    def command(version: str, *extra: str) -> list[str]:
        install_stand_in(tmp_path / f"site-{version}", version)
        return [
            sys.executable,
            "-m",
            "sglang.launch_server",
            "--model-path",
            str(models / "target"),
            "--speculative-algorithm",
            "DFLASH",
            "--speculative-draft-model-path",
            str(models / "drafter"),
            "--max-running-requests",
            "8",
            "--api-key",
            SECRET,
            "--enable-metrics",
            "--port",
            str(port),
            *extra,
        ]

    def write(version: str, env: str = "", context: int = 131072) -> None:
        argv = command(version, "--context-length", str(context))
        site = tmp_path / f"site-{version}"
        script.write_text(
            "#!/usr/bin/env bash\n# stand-in DFlash server\n"
            f"export PYTHONPATH={site}\n{env}exec " + " \\\n  ".join(argv) + "\n"
        )
        script.chmod(0o755)

    def start(manual: list[str] | None = None, version: str = "0.5.23") -> None:
        """Start from the script, or by hand with `manual` flags (not from the script)."""
        if manual is None:
            subprocess.run(
                ["sh", "-c", 'setsid nohup "$0" >>"$1" 2>&1 </dev/null &', str(script), str(log)],
                check=True,
            )
        else:
            full = {**os.environ, "PYTHONPATH": str(tmp_path / f"site-{version}")}
            with open(log, "ab") as out:
                subprocess.Popen(
                    command(version, *manual),
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    env=full,
                )
        deadline = time.monotonic() + 20
        while not healthy(port):
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)

    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "hosts": {
                    "gpu-live": {
                        "address": sshd.address,
                        "identity_file": str(sshd.client_key),
                        "launch_file": str(script),
                        "log_path": str(log),
                    }
                }
            }
        )
    )
    ssh = ["--known-hosts", str(sshd.known_hosts), "--ssh-config", "/dev/null"]

    def doctor(*args: str) -> subprocess.CompletedProcess[str]:
        return run_doctor(*args, columns=250, timeout=300)

    yield {
        "port": port,
        "script": script,
        "log": log,
        "write": write,
        "start": start,
        "doctor": doctor,
        "inventory": str(inventory),
        "ssh": ssh,
        "sshd": sshd,
    }
    for pid in pids_on(port):
        os.kill(pid, signal.SIGKILL)


def window_now(port: int) -> object:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/server_info")
    req.add_header("Authorization", f"Bearer {SECRET}")
    with urllib.request.urlopen(req, timeout=2) as r:
        info = json.loads(r.read())
    return info.get(
        "speculative_dflash_draft_window_size", info.get("speculative_draft_window_size")
    )


def bench_args(stand_in, *extra: str) -> list[str]:  # type: ignore[no-untyped-def]
    """`bench` over the real sshd at the stand-in server, with `extra` options."""
    sshd = stand_in["sshd"]
    return [
        "bench", sshd.address, "-i", str(sshd.client_key), *stand_in["ssh"],
        "--pid", str(pids_on(stand_in["port"])[0]), "--launch", str(stand_in["script"]),
        "--max-new-tokens", "32", "--format", "json", *extra,
    ]  # fmt: skip


def logged(tmp_path: Path) -> list[dict[str, object]]:
    """What reached the stand-in: one row per /generate (FAKE_SGLANG_REQUEST_LOG)."""
    path = tmp_path / "requests.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_bench_sends_real_text_sized_and_repeated(stand_in, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    stand_in["write"]("0.5.11", f"export FAKE_SGLANG_REQUEST_LOG={tmp_path / 'requests.jsonl'}\n")
    stand_in["start"]()
    p = stand_in["doctor"](
        *bench_args(stand_in, "--contexts", "512,2048,8192", "--concurrency", "1,16",
                    "--output", str(tmp_path / "bench.json")),
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    assert SECRET not in p.stdout + p.stderr
    doc = json.loads(p.stdout)
    assert doc == json.loads((tmp_path / "bench.json").read_text())
    assert doc["schema"] == "dflash-doctor-bench/2" and doc["sglang_version"] == "0.5.11"
    assert doc["prompts"] == ["code", "prose"] and doc["repeats"] == 3
    assert "PSF" in doc["corpus_notice"] and doc["collapse"] == []
    assert doc["concurrency"] == [1, 8]  # 16 capped by --max-running-requests 8
    cells = doc["cells"]
    assert len(cells) == 2 * 3 * 2 * 2 and not any(c["errors"] for c in cells)
    for c in cells:
        assert c["sized_by"] == "tokenize" and len(c["per_request"]) == 3 * c["concurrency"]
        assert len(c["accept_length_repeats"]) == 3 and c["accept_length_ci95"] is not None
        lo, hi = c["accept_length_ci95"]
        assert lo <= c["accept_length"] <= hi and c["accept_histogram"]
        # sized with the server's tokenizer to the cell's context, task included
        for r in c["per_request"]:
            assert abs(r["prompt_tokens"] - c["context"]) <= max(3, 0.03 * c["context"]), (
                c["prompts"],
                c["concurrency"],
                c["temperature"],
                [x["prompt_tokens"] for x in c["per_request"]],
            )
            assert r["completion_tokens"] <= 32
    assert any(c["stopped_share"] for c in cells)  # natural stop, the cap only a cap
    # What reached the server: corpus text, never ids, never ignore_eos; repeats differ.
    rows, probe = logged(tmp_path)[:-2], logged(tmp_path)[-2:]
    assert len(rows) == sum(len(c["per_request"]) for c in cells)
    # then the prefix-reuse probe: one greedy prompt twice (bench/prefix_probe.py)
    assert probe[0] == probe[1] and probe[0]["temperature"] == 0
    assert doc["prefix_probe"]["first_mismatch"] is None and doc["prefix_probe"]["cached_tokens"]
    assert not any(r["input_ids"] or r["ignore_eos"] for r in rows)
    from dflash_doctor.bench.prompts import corpus

    texts = {k: corpus()[k]["text"] * 2 for k in ("code", "prose")}
    for r in rows:
        head = str(r["text"])[:300]
        assert head in texts["code"] or head in texts["prose"]
    # the same excerpts at T=0 and T=1 (comparable), distinct otherwise
    assert len({str(r["text"]) for r in rows}) == len(rows) // 2
    greedy = {
        (c["prompts"], c["context"]): c["accept_length"]
        for c in cells
        if c["concurrency"] == 1 and c["temperature"] == 0
    }
    # The stand-in's model accepts more on code than prose; 0.5.11 serves the sliding layers
    # over the whole context, so acceptance falls past the 2048 window.
    assert greedy[("code", 512)] > greedy[("prose", 512)] + 1
    assert greedy[("code", 8192)] < greedy[("code", 2048)] - 0.5
    # before each repeat of each cell, and once before the prefix-reuse probe
    assert stand_in["log"].read_text().count("Cache flushed successfully!") == len(cells) * 3 + 1


def test_bench_sends_a_users_file_as_given_and_random_as_control(stand_in, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    stand_in["write"]("0.5.23", f"export FAKE_SGLANG_REQUEST_LOG={tmp_path / 'requests.jsonl'}\n")
    stand_in["start"]()
    mine = ["def f(x):\n    return x + 1\n\nWrite tests for f.", "Summarise: the sky is blue."]
    traffic = tmp_path / "traffic.jsonl"
    traffic.write_text("\n".join(json.dumps({"prompt": t}) for t in mine) + "\n")
    p = stand_in["doctor"](
        *bench_args(stand_in, "--prompts", f"random,{traffic}", "--contexts", "512",
                    "--concurrency", "2", "--repeats", "3"),
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads(p.stdout)
    assert doc["prompts"] == ["random (content-free control)", "file traffic.jsonl"]
    by_kind = {c["prompts"]: c for c in doc["cells"] if c["temperature"] == 0}
    assert by_kind["file traffic.jsonl"]["context"] == 0  # as given, not sized
    assert by_kind["file traffic.jsonl"]["sized_by"] == "as given"
    rows = logged(tmp_path)
    sent = [r["text"] for r in rows if not r["input_ids"]]
    assert sent and set(sent) == set(mine)  # exactly the user's prompts, nothing added
    ids = [r for r in rows if r["input_ids"]]
    assert ids and all(r["ignore_eos"] and r["prompt_tokens"] == 512 for r in ids)
    # two kinds x two temperatures x 2 requests x 3 repeats, then the prefix-reuse probe
    # twice: the user's longest prompt
    assert len(rows) == 2 * 2 * 2 * 3 + 2
    assert rows[-1]["text"] == rows[-2]["text"] == max(mine, key=len)


def test_bench_rejects_a_bad_prompts_file_in_one_line(stand_in, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"prompt": "ok"}\n{"prompt": 3}\n' + b"[" * 100_000 + b"\n")
    p = stand_in["doctor"]("bench", "local", "--prompts", str(bad))
    assert p.returncode == 2 and f"{bad}:2: expected a JSON object" in p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
    p = stand_in["doctor"]("bench", "local", "--prompts", "poetry")
    assert p.returncode == 2 and "code, prose, random or a FILE.jsonl" in p.stderr


def test_bench_reports_a_silent_collapse_with_causes(stand_in, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # 0.5.17+ DFLASH forces the accept length from SGLANG_SIMULATE_ACC_LEN: 1.0 is collapse.
    stand_in["write"]("0.5.23", "export SGLANG_SIMULATE_ACC_LEN=1.0\n")
    stand_in["start"]()
    p = stand_in["doctor"](
        *bench_args(stand_in, "--contexts", "512,4096", "--concurrency", "1", "--format", "text")
    )
    assert p.returncode == 1, p.stdout + p.stderr
    assert "speculation has collapsed" in p.stdout
    likely = [line for line in p.stdout.splitlines() if "likely:" in line]
    assert likely and "SGLANG_SIMULATE_ACC_LEN=1.0" in likely[0]  # the fact ranks first


def test_bench_refuses_a_server_under_traffic(stand_in) -> None:  # type: ignore[no-untyped-def]
    stand_in["write"]("0.5.23", "export FAKE_SGLANG_BUSY=3\n")
    stand_in["start"]()
    sshd = stand_in["sshd"]
    p = stand_in["doctor"](
        "bench", sshd.address, "-i", str(sshd.client_key), *stand_in["ssh"], "--pid",
        str(pids_on(stand_in["port"])[0]), "--launch", str(stand_in["script"]),
    )  # fmt: skip
    assert p.returncode == 2 and "serving traffic (3 running or queued" in p.stderr
    assert "Cache flushed" not in stand_in["log"].read_text()


def test_fix_apply_bench_keeps_a_fix_that_helps(stand_in) -> None:  # type: ignore[no-untyped-def]
    # 0.5.11 ignores layer_types: a draft window restores the sliding layers' trained span.
    stand_in["write"]("0.5.11")
    stand_in["start"]()
    p = stand_in["doctor"](
        "fix", "-I", stand_in["inventory"], *stand_in["ssh"], "--health-timeout", "15",
        "--apply", "--yes", "--bench", *SMALL,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    assert "before the fix" in p.stdout and "after the fix" in p.stdout
    assert "bench: kept: beyond the window accept length" in p.stdout
    assert "applied to" in p.stdout
    assert window_now(stand_in["port"]) == 2048
    assert SECRET not in p.stdout + p.stderr


def test_fix_apply_bench_rolls_back_a_fix_that_hurts(stand_in) -> None:  # type: ignore[no-untyped-def]
    # The drafter's config says sliding_attention, but it was trained with full attention
    # (the stand-in's FAKE_SGLANG_TRAINED_SPANS=full): the window now only cuts context off.
    stand_in["write"]("0.5.11", "export FAKE_SGLANG_TRAINED_SPANS=full\n")
    original = stand_in["script"].read_bytes()
    stand_in["start"]()
    p = stand_in["doctor"](
        "fix", "-I", stand_in["inventory"], *stand_in["ssh"], "--health-timeout", "15",
        "--apply", "--yes", "--bench", *SMALL,
    )  # fmt: skip
    assert p.returncode == 4, p.stdout + p.stderr
    assert "bench: not kept" in p.stdout and "worse by more than 5 %" in p.stdout
    assert "rolled back" in p.stdout
    assert stand_in["script"].read_bytes() == original
    assert healthy(stand_in["port"]) and window_now(stand_in["port"]) is None
    assert "last server log lines" in p.stdout and SECRET not in p.stdout + p.stderr


def test_check_reports_a_launch_file_that_is_not_what_runs(stand_in) -> None:  # type: ignore[no-untyped-def]
    # The file says 131072, but the server was started by hand with 65536 and a window.
    stand_in["write"]("0.5.23")
    stand_in["start"](["--context-length", "65536", "--speculative-draft-window-size", "4096"])
    p = stand_in["doctor"](
        "check", "-I", stand_in["inventory"], *stand_in["ssh"], "--format", "json",
        "--bench", *SMALL,
    )  # fmt: skip
    assert SECRET not in p.stdout + p.stderr
    report = json.loads(p.stdout)
    (host,) = report["hosts"]
    results = {r["check_id"]: r for r in host["results"]}
    (finding,) = results["DFD141"]["findings"]
    assert (
        "context_length" in finding["title"] and "speculative_draft_window_size" in finding["title"]
    )
    texts = [e["text"] for e in finding["evidence"]]
    assert "--context-length 131072" in texts
    assert "server answers context_length=65536" in texts
    assert "server answers speculative_draft_window_size=4096" in texts
    assert host["facts"]["runtime"]["value"]["version"] == "0.5.23"
    bench = host["facts"]["bench"]["value"]
    assert bench["contexts"] == [512, 16384] and len(bench["cells"]) == 2 * 8  # code, prose
    # The window checks carry the measured curve (the 4096 window clamps the full layer).
    window_findings = [f for cid in SPAN_CHECKS for f in results.get(cid, {}).get("findings", [])]
    assert window_findings
    for f in window_findings:
        assert any(e["text"].startswith("bench on the live server") for e in f["evidence"])


def test_bench_evidence_goes_to_the_window_findings_only() -> None:
    from dflash_doctor.bench.evidence import attach_bench_evidence
    from dflash_doctor.runner import run_checks

    facts = host_facts(drafter=drafter_cfg(), launch_args=launch(), version="0.5.11")
    facts = facts.model_copy(update={"bench": Fact.of(sweep({1024: 4.0, 16384: 2.0}))})
    results = run_checks(facts)
    attach_bench_evidence(facts, results)
    tagged = {
        r.check_id
        for r in results
        for f in r.findings
        if any(e.text.startswith("bench on the live server") for e in f.evidence)
    }
    window_ids = {r.check_id for r in results if r.findings and r.check_id in SPAN_CHECKS}
    assert window_ids and tagged == window_ids
    finding = next(f for r in results if r.check_id in tagged for f in r.findings)
    assert "accept length 4.0 at 1k, 2.0 at 16k" in finding.evidence[-1].text
    assert finding.impact["bench_accept_length_beyond_window"] == 2.0


def test_hostile_server_answers_become_one_line(tmp_path: Path) -> None:
    """Deeply nested, non-JSON and wrong-typed answers: a missing fact, never a traceback."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from dflash_doctor.errors import FactError
    from dflash_doctor.finders.server_api import ask_server
    from dflash_doctor.transport.local import LocalTransport

    answers = {
        "/server_info": b"[" * 100_000 + b"]" * 100_000,
        "/get_server_info": b"\xff\xfe not json",
        "/metrics": b'sglang:x{a="1"} notanumber\nsglang:y 1e999\n',
    }

    class Hostile(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = answers.get(self.path, b"")
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *a: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        address = ("127.0.0.1", server.server_address[1])
        info, metrics = ask_server(
            LocalTransport(), address, None, [{"op": "info"}, {"op": "metrics"}], timeout=10
        )
        assert "unreadable answer" in info["error"] or "not JSON" in info["error"]
        assert metrics == {"samples": {}}  # NaN, inf and non-numbers dropped
        with pytest.raises(FactError):
            parse_runtime(info, metrics, "http://x")
        rt = parse_runtime(
            {"endpoint": "/server_info", "body": {"internal_states": "x", "a": {"b": 1}}},
            {"samples": {"m": [{"labels": [], "value": "x"}]}},
            "http://x",
        )
        assert rt.args == {} and rt.metrics is None and rt.metrics_error
    finally:
        server.shutdown()
        server.server_close()


def test_bench_baseline_finds_where_dflash_stops_paying(stand_in, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Two stand-ins of one model: DFLASH (0.5.11: sliding layers served past the window, so
    acceptance falls at long contexts) and the same model without --speculative-algorithm
    on another port. The stand-in prices a verify step dearer as the batch grows (its
    `step_cost`), so speculation pays at concurrency 1 and not at 8 on long contexts."""
    step = "export FAKE_SGLANG_STEP_S=0.01\n"
    stand_in["write"](
        "0.5.11", step + f"export FAKE_SGLANG_REQUEST_LOG={tmp_path / 'spec.jsonl'}\n"
    )
    stand_in["start"]()
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(tmp_path / "site-0.5.11"),
        "FAKE_SGLANG_STEP_S": "0.01",
        "FAKE_SGLANG_REQUEST_LOG": str(tmp_path / "plain.jsonl"),
    }
    models = tmp_path / "models"
    plain_argv = [sys.executable, "-m", "sglang.launch_server", "--model-path",
                  str(models / "target"), "--port", str(port)]  # fmt: skip
    with open(tmp_path / "plain.log", "ab") as out:
        plain = subprocess.Popen(
            plain_argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        )
    try:
        deadline = time.monotonic() + 20
        while not healthy(port):
            assert time.monotonic() < deadline and plain.poll() is None
            time.sleep(0.1)
        p = stand_in["doctor"](
            *bench_args(stand_in, "--contexts", "512,8192", "--concurrency", "1,8",
                        "--temperature", "0", "--repeats", "5", "--baseline-port", str(port)),
        )  # fmt: skip
        text = stand_in["doctor"](
            *bench_args(stand_in, "--contexts", "512", "--concurrency", "1", "--prompts", "code",
                        "--temperature", "0", "--baseline-port", str(port), "--format", "text"),
        )  # fmt: skip
    finally:
        plain.terminate()
        plain.wait(timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads(p.stdout)
    base = doc["baseline"]
    assert f"port {port}" in base["source"] and "without --speculative-algorithm" in base["source"]
    # What reached each server: the same text, sizes and repeats; the plain one answers
    # without spec_* keys, so its cells have no accept length.
    spec_rows, plain_rows = (
        logged_file(tmp_path / "spec.jsonl"),
        logged_file(tmp_path / "plain.jsonl"),
    )
    # the prefix-reuse probe runs on the DFLASH server only: twice per bench, after its cells
    probe = [r for r in spec_rows if "Continue the text above" in str(r["text"])]
    spec_rows = [r for r in spec_rows if r not in probe]
    assert len(probe) == 4 and all(r == probe[0] for r in probe)
    # two kinds x two contexts x (1 + 8) requests x 5 repeats, then the text run's 3
    assert len(spec_rows) == len(plain_rows) == 2 * 2 * (1 + 8) * 5 + 3
    assert sorted(str(r["text"]) for r in spec_rows) == sorted(str(r["text"]) for r in plain_rows)
    assert all(c["accept_length"] is None and c["tokens_per_s_total"] for c in base["cells"])
    by = {(q["prompts"], q["context"], q["concurrency"]): q for q in base["pairs"]}
    assert len(by) == 8
    for q in by.values():
        assert q["tokens_per_s"] and q["tokens_per_s_baseline"] and q["break_even_accept_length"]
        assert q["latency_s"] and q["latency_s_baseline"]
    # Concurrency 1: speculation pays (break-even near the stand-in's 1.25 step ratio).
    assert by[("code", 512, 1)]["verdict"] == "faster"
    assert by[("code", 512, 1)]["break_even_accept_length"] < 2.0
    # Concurrency 8: a verify step costs up to ~3.6 plain steps (fewer as requests stop
    # naturally and the batch thins); prose past the window accepts ~1.5. The repeats are
    # paired (the same excerpts on both servers), so the speedup's interval is narrow.
    slow = by[("prose", 8192, 8)]
    assert slow["verdict"] == "slower" and slow["speedup_ci95"][1] < 1.0
    assert slow["break_even_accept_length"] > slow["accept_length"]
    # the break-even rises with the batch: a verify step costs more plain steps at 8 than at 1
    for kind, ctx in (("code", 512), ("prose", 8192)):
        assert by[(kind, ctx, 8)]["break_even_accept_length"] > (
            by[(kind, ctx, 1)]["break_even_accept_length"] + 0.3
        )
    region = [line for line in base["verdict"] if line.startswith("DFLASH is slower")]
    assert region and "8192x8" in region[0] and "x1" not in region[0]
    assert any("--max-running-requests" in line for line in base["verdict"])
    # The terminal report shows the pair per cell in 80 columns.
    assert text.returncode == 0, text.stdout + text.stderr
    assert "with vs without speculation: code" in text.stdout and "tok/s on/off" in text.stdout


def logged_file(path: Path) -> list[dict[str, object]]:
    """One row per /generate the stand-in logged to `path` (FAKE_SGLANG_REQUEST_LOG)."""
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
