"""Kubernetes hosts through a recorded kubectl (fixtures/containers/kubectl.py on PATH): no
cluster runs here, so these test the commands the doctor builds and how it reads the answers
(the pod's files, process, log and GPUs; its owner; the patch `fix` prints)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from dflash_doctor.container_targets import parse_container_target
from dflash_doctor.errors import TransportError, UsageError
from dflash_doctor.transport.kubernetes import KubeTarget, parse_pod
from tests.cli_helper import doctor as run_doctor

REPO = Path(__file__).resolve().parents[2]
RECORDINGS = REPO / "fixtures/containers/k8s"
DEMO_HOST = REPO / "dflash_doctor/demo_hosts/seed"
POD = "sglang-kimi-7d9f8c6b5d-x2x9q"


@pytest.fixture
def kube(tmp_path: Path):  # type: ignore[no-untyped-def]
    def make(scenario: str) -> dict[str, Any]:
        rec = tmp_path / scenario
        shutil.copytree(RECORDINGS / scenario, rec)
        shutil.copytree(DEMO_HOST, rec / "root", symlinks=True)  # the container's files
        shutil.copy(DEMO_HOST / "var/log/sglang/server.log", rec / "logs.txt")
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir(exist_ok=True)
        shim = bin_dir / "kubectl"
        shim.write_text(
            f"#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} "
            f'{REPO / "fixtures/containers/kubectl.py"} "$@"\n'
        )
        shim.chmod(0o755)

        def doctor(*args: str) -> subprocess.CompletedProcess[str]:
            return run_doctor(
                *args,
                # wide enough that the patch command prints on one line
                columns=5000,
                timeout=300,
                path=f"{bin_dir}:/usr/bin:/bin",
                env={"FAKE_KUBECTL_DIR": str(rec)},
            )

        def calls() -> list[list[str]]:
            path = rec / "calls.jsonl"
            return (
                [json.loads(line) for line in path.read_text().splitlines()]
                if path.exists()
                else []
            )

        return {"dir": rec, "doctor": doctor, "calls": calls}

    return make


def test_check_reads_the_pod_through_kubectl(kube, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    k = kube("deployment")
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "hosts": {
                    "kimi": {
                        "pod": POD,
                        "namespace": "inference",
                        "kubeconfig": "/etc/kube/prod.yaml",
                        "kube_context": "prod-east",
                        "log_since": "15m",
                    }
                }
            }
        )
    )
    p = k["doctor"]("check", "-I", str(inventory), "--format", "json")
    assert p.returncode == 1, p.stdout + p.stderr
    for secret in ("sk-fixture-secret", "hf_FAKEfixture"):
        assert secret not in p.stdout + p.stderr
    (host,) = json.loads(p.stdout)["hosts"]
    facts = host["facts"]
    assert facts["launch"]["source"] == "/proc/4242/cmdline"
    assert facts["drafter"]["source"] == "/models/Kimi-K2.6-DFlash/config.json"
    assert facts["sglang_version"]["value"] == "0.5.13"
    assert facts["log"]["source"] == "kubernetes logs"
    assert len(facts["gpus"]["value"]) == 8  # nvidia-smi in the pod: the GPUs it was given
    results = {r["check_id"]: r["status"] for r in host["results"]}
    assert results["DFD103"] == "failed"
    calls = k["calls"]()
    head = ["--kubeconfig=/etc/kube/prod.yaml", "--context=prod-east", "--namespace=inference"]
    assert all(c[:3] == head for c in calls), calls[:3]
    assert [*head, "get", "pod", POD, "--output=json"] in calls
    # Every exec and log names the server's container (the pod's second), not kubectl's default.
    execs = [c for c in calls if c[3] == "exec"]
    assert execs and all(c[4:7] == [POD, "--container=sglang", "--"] for c in execs)
    (logs,) = [c for c in calls if c[3] == "logs"]
    assert logs[4:] == [POD, "--tail=200000", "--container=sglang", "--since=15m"]


def test_fix_prints_a_patch_of_the_deployment_and_never_applies(kube) -> None:  # type: ignore[no-untyped-def]
    k = kube("deployment")
    p = k["doctor"]("fix", f"k8s://prod-east@inference/{POD}")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "change Deployment sglang-kimi (it owns pod" in p.stdout
    line = next(x for x in p.stdout.splitlines() if x.startswith("kubectl "))
    argv = __import__("shlex").split(line)
    assert argv[:6] == [
        "kubectl",
        "--context=prod-east",
        "--namespace=inference",
        "patch",
        "deployment",
        "sglang-kimi",
    ]
    assert argv[6] == "--type=json"
    ops = json.loads(argv[7].removeprefix("--patch="))
    # Applied to the recorded Deployment, the patch changes only the server's args.
    deployment = json.loads((k["dir"] / "deployment-sglang-kimi.json").read_text())
    (op,) = ops
    assert op["op"] == "add" and op["path"] == "/spec/template/spec/containers/1/args"
    before = deployment["spec"]["template"]["spec"]["containers"][1]["args"]
    assert op["value"][: len(before)] == before  # $(SGLANG_API_KEY) kept as written
    assert op["value"][len(before) :] == ["--speculative-draft-window-size", "2048"]
    assert not any(c[3] in ("patch", "apply", "edit", "replace") for c in k["calls"]())

    p = k["doctor"]("fix", f"k8s://prod-east@inference/{POD}", "--apply", "--yes")
    assert p.returncode == 2 and "never changes a cluster" in p.stdout, p.stdout
    assert not any(c[3] in ("patch", "apply", "edit", "replace") for c in k["calls"]())


def test_leaderworkerset_patch_covers_leader_and_workers(kube) -> None:  # type: ignore[no-untyped-def]
    k = kube("lws")
    p = k["doctor"]("fix", "k8s://inference/sglang-kimi-0/sglang")
    assert p.returncode == 0, p.stdout + p.stderr
    line = next(x for x in p.stdout.splitlines() if x.startswith("kubectl "))
    argv = __import__("shlex").split(line)
    assert argv[3:5] == ["leaderworkerset.leaderworkerset.x-k8s.io", "sglang-kimi"]
    paths = [op["path"] for op in json.loads(argv[6].removeprefix("--patch="))]
    assert paths == [
        "/spec/leaderWorkerTemplate/leaderTemplate/spec/containers/1/args",
        "/spec/leaderWorkerTemplate/workerTemplate/spec/containers/1/args",
    ]
    gets = [c[2:4] for c in k["calls"]() if c[1] == "get"]
    assert (
        gets
        == [
            ["pod", "sglang-kimi-0"],
            ["statefulset", "sglang-kimi"],
            ["leaderworkerset.leaderworkerset.x-k8s.io", "sglang-kimi"],
        ]
        or ["statefulset", "sglang-kimi"] in gets
    )


def test_unknown_pod_is_one_line(kube) -> None:  # type: ignore[no-untyped-def]
    k = kube("deployment")
    p = k["doctor"]("check", "k8s://inference/no-such-pod")
    assert p.returncode == 3, p.stdout + p.stderr
    assert 'pods "no-such-pod" not found' in p.stdout + p.stderr
    assert "Traceback" not in p.stderr


@pytest.mark.parametrize(
    "target",
    [
        "k8s://inference/-rf",
        "k8s://Inference/pod",
        "k8s://ns",
        "k8s://ns/pod/c/extra",
        "k8s://--kubeconfig=/x@ns/pod",
        "k8s://ns/pod;id",
    ],
)
def test_bad_targets_are_usage_errors(target: str) -> None:
    with pytest.raises(UsageError):
        parse_container_target(target)


def test_target_forms() -> None:
    assert parse_container_target("k8s://prod@inference/sglang-0/sglang") == {
        "name": "k8s://prod@inference/sglang-0/sglang",
        "namespace": "inference",
        "pod": "sglang-0",
        "container": "sglang",
        "kube_context": "prod",
    }
    t = KubeTarget("inference", "p", "c", kubeconfig="/k", context="x y")
    assert t.exec_argv(["id", "-u"]) == [
        "kubectl",
        "--kubeconfig=/k",
        "--context=x y",
        "--namespace=inference",
        "exec",
        "p",
        "--container=c",
        "--",
        "id",
        "-u",
    ]
    assert t.logs_argv(10, "15m")[-1] == "--since=15m"
    assert t.logs_argv(10, "2026-12-01T10:00:00Z")[-1] == "--since-time=2026-12-01T10:00:00Z"
    with pytest.raises(TransportError):
        t.logs_argv(10, "--all")
    with pytest.raises(TransportError):
        KubeTarget("inference", "-p")


def test_pod_parsing_is_typed_and_hides_secrets() -> None:
    data = (RECORDINGS / "deployment/pod.json").read_bytes()
    pod = parse_pod(data, POD, None)
    assert pod.container == "sglang" and pod.index == 1
    assert pod.env["SGLANG_API_KEY"] == "<from secretKeyRef>"
    with pytest.raises(TransportError, match="no container 'x'"):
        parse_pod(data, POD, "x")
    with pytest.raises(TransportError, match="not JSON"):
        parse_pod(b"{", POD, None)
    with pytest.raises(TransportError, match="no containers"):
        parse_pod(b'{"spec": {}}', POD, None)


@pytest.mark.parametrize("kind", ["--server=https://evil.example", "-v=9", "DaemonSet"])
def test_owner_kind_outside_the_fixed_set_never_reaches_kubectl(kube, kind: str) -> None:  # type: ignore[no-untyped-def]
    """A pod's `ownerReferences[].kind` is the pod owner's text: only kinds of a fixed set
    are followed, so no host word becomes a kubectl option (issue 22 item 6)."""
    k = kube("deployment")
    pod_file = k["dir"] / "pod.json"
    pod = json.loads(pod_file.read_text())
    pod["metadata"]["ownerReferences"][0]["kind"] = kind
    pod_file.write_text(json.dumps(pod))
    p = k["doctor"]("fix", f"k8s://prod-east@inference/{POD}")
    assert "Traceback" not in p.stdout + p.stderr
    for argv in k["calls"]():
        # kubectl's own options come from the doctor; nothing after the verb starts with `-`
        # unless the doctor wrote it (--output=json, --container=, --tail=, the exec `--`).
        assert not any(word.startswith(("--server", "-v")) for word in argv), argv
        assert kind not in argv and kind.lower() not in argv, argv
