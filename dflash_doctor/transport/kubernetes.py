"""A Kubernetes pod as a host: `k8s://NAMESPACE/POD[/CONTAINER]`, through `kubectl`.

Everything goes through the user's own `kubectl` with their kubeconfig and context (given as
`--kubeconfig=` / `--context=` words, so no value can be read as another option):

- commands: `kubectl exec POD -c CONTAINER -- ...` (as the container's user, bounded there by
  `timeout` like every remote command); files by the fixed sh scripts of exec_files.py;
- the log: `kubectl logs --tail=N [--since=D | --since-time=T]` (the container's stdout and
  stderr as the kubelet keeps them);
- GPUs: `nvidia-smi` inside the container (a pod sees only the GPUs it was given);
- the launch: the container's command + args and env from `kubectl get pod -o json`
  (`launch_argv`, `launch_env`: secret values and secretKeyRef values never shown), and the
  object that owns the pod (Deployment, StatefulSet, LeaderWorkerSet) for `fix`, which prints
  a patch of that object and never changes a cluster.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from dflash_doctor.errors import HostUnreachable, Refused, TransportError
from dflash_doctor.redact import is_secret_name, redact_argv
from dflash_doctor.transport.base import (
    CommandResult,
    FileId,
    HostKind,
    HostReach,
    LogCommand,
    StderrLines,
    Transport,
    bounded_on_host,
)
from dflash_doctor.transport.commands import HostCommands
from dflash_doctor.transport.exec_files import ExecFiles

K8S_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
DURATION = re.compile(r"([0-9]{1,9}(h|m|s))+")
RFC3339 = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]{8,20}(Z|[+-][0-9]{2}:[0-9]{2})")
K8S_RESOURCE = re.compile(r"[a-z][a-z0-9]{0,62}(\.[a-z0-9][-a-z0-9.]{0,252})?")
MAX_JSON_BYTES = 8 * 1024 * 1024
REDACTED = "***"
# Owner kinds `fix` patches, and where each keeps its pod template(s).
TEMPLATE_PATHS = {
    "Deployment": ("/spec/template",),
    "StatefulSet": ("/spec/template",),
    "LeaderWorkerSet": (
        "/spec/leaderWorkerTemplate/leaderTemplate",
        "/spec/leaderWorkerTemplate/workerTemplate",
    ),
}
# Kinds that are only a step between a pod and what the user edits.
INTERMEDIATE = ("ReplicaSet", "StatefulSet")
API_OF = {"LeaderWorkerSet": "leaderworkerset.x-k8s.io"}
# The only owner kinds followed: a pod's `ownerReferences[].kind` is its owner's text, and
# it becomes a kubectl word (`get KIND`); anything else (`--server=...`) is never asked.
OWNER_KINDS = frozenset({*TEMPLATE_PATHS, *INTERMEDIATE})


def check_name(name: str, what: str) -> str:
    if not K8S_NAME.fullmatch(name):
        raise TransportError(f"{name!r}: not a Kubernetes {what} name (lower-case DNS-1123)")
    return name


@dataclass(frozen=True)
class KubeTarget:
    namespace: str
    pod: str
    container: str | None = None
    kubeconfig: str | None = None
    context: str | None = None

    def __post_init__(self) -> None:
        check_name(self.namespace, "namespace")
        check_name(self.pod, "pod")
        if self.container is not None:
            check_name(self.container, "container")
        for what, value in (("kubeconfig", self.kubeconfig), ("context", self.context)):
            if value is not None and (not value or "\n" in value or "\0" in value):
                raise TransportError(f"{what} {value!r}: not a usable value")

    def base(self) -> list[str]:
        """`kubectl` and the words that pick the cluster and namespace."""
        words = ["kubectl"]
        if self.kubeconfig:
            words.append(f"--kubeconfig={self.kubeconfig}")
        if self.context:
            words.append(f"--context={self.context}")
        words.append(f"--namespace={self.namespace}")
        return words

    def exec_argv(self, argv: list[str]) -> list[str]:
        words = [*self.base(), "exec", self.pod]
        if self.container:
            words.append(f"--container={self.container}")
        return [*words, "--", *argv]

    def log_command(self) -> LogCommand:
        """`kubectl logs` of the pod's container (the kubelet's copy of its stdout and
        stderr), bounded to its last lines and, when given, since a duration or a time."""
        return LogCommand(
            before=(*self.base(), "logs", self.pod),
            tail="--tail=",
            middle=(f"--container={self.container}",) if self.container else (),
            since=((DURATION.pattern, "--since="), (RFC3339.pattern, "--since-time=")),
            since_refused="a duration (10m, 1h) or RFC 3339 time",
        )

    def logs_argv(self, tail_lines: int, since: str | None = None) -> list[str]:
        """The `kubectl logs` argv for the last `tail_lines` lines, since `since` if given."""
        return self.log_command().argv(tail_lines, since)

    def get_argv(self, kind: str, name: str) -> list[str]:
        # Neither word may start with `-`: a kind of our own set (or the doctor's `pod`),
        # a DNS-1123 name.
        if not K8S_RESOURCE.fullmatch(kind):
            raise TransportError(f"{kind!r}: not a Kubernetes resource the doctor reads")
        return [*self.base(), "get", kind, check_name(name, kind), "--output=json"]


@dataclass(frozen=True)
class Owner:
    kind: str
    name: str
    api_version: str = ""


@dataclass(frozen=True)
class PodInfo:
    name: str
    container: str
    index: int
    command: list[str]
    args: list[str]
    env: dict[str, str]
    owners: list[Owner] = field(default_factory=list)

    @property
    def argv(self) -> list[str]:
        return [*self.command, *self.args]


def _load(data: bytes, what: str) -> dict[str, Any]:
    if len(data) > MAX_JSON_BYTES:
        raise TransportError(f"{what}: larger than {MAX_JSON_BYTES} bytes")
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError):
        raise TransportError(f"{what}: not JSON") from None
    if not isinstance(obj, dict):
        raise TransportError(f"{what}: not a JSON object")
    return obj


def _strs(value: object, what: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TransportError(f"{what}: not a list of strings")
    return list(value)


def owners_of(obj: dict[str, Any]) -> list[Owner]:
    meta = obj.get("metadata")
    refs = meta.get("ownerReferences") if isinstance(meta, dict) else None
    out = []
    for ref in refs if isinstance(refs, list) else []:
        if isinstance(ref, dict) and ref.get("kind") in OWNER_KINDS:
            out.append(
                Owner(str(ref["kind"]), str(ref.get("name", "")), str(ref.get("apiVersion", "")))
            )
    return out


def parse_pod(data: bytes, pod: str, container: str | None) -> PodInfo:
    """The server container of a pod from `kubectl get pod -o json`."""
    obj = _load(data, f"pod {pod}")
    spec = obj.get("spec")
    containers = spec.get("containers") if isinstance(spec, dict) else None
    if not isinstance(containers, list) or not containers:
        raise TransportError(f"pod {pod}: no containers in its spec")
    index = 0
    if container is not None:
        names = [c.get("name") if isinstance(c, dict) else None for c in containers]
        if container not in names:
            raise TransportError(f"pod {pod}: no container {container!r}")
        index = names.index(container)
    elif len(containers) > 1:
        # The container whose command runs SGLang, else the first (kubectl's default too).
        for i, c in enumerate(containers):
            words = (
                [*(c.get("command") or []), *(c.get("args") or [])] if isinstance(c, dict) else []
            )
            if any(isinstance(w, str) and "sglang" in w for w in words):
                index = i
                break
    c = containers[index]
    if not isinstance(c, dict):
        raise TransportError(f"pod {pod}: container {index} is not an object")
    env: dict[str, str] = {}
    for item in c.get("env") or []:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        name = item["name"]
        if "valueFrom" in item:
            ref = item["valueFrom"] if isinstance(item["valueFrom"], dict) else {}
            source = next(iter(ref), "valueFrom")
            env[name] = f"<from {source}>"
        else:
            value = str(item.get("value", ""))
            env[name] = REDACTED if is_secret_name(name) else value
    return PodInfo(
        name=pod,
        container=str(c.get("name", "")),
        index=index,
        command=_strs(c.get("command"), f"pod {pod} command"),
        args=_strs(c.get("args"), f"pod {pod} args"),
        env=env,
        owners=owners_of(obj),
    )


class KubernetesTransport(ExecFiles, HostCommands):
    """One container of one pod, through the user's `kubectl` on `outer`'s machine."""

    kind: HostKind = "kubernetes"
    remote = True  # every question is a round trip to the API server and the kubelet
    bundles = True

    def __init__(self, host: str, outer: Transport, target: KubeTarget) -> None:
        self.host = host
        self.outer = outer
        self.target = target
        self.relaunch_refused: str | None = (
            "Kubernetes pods are changed through their owner: `fix` prints the patch"
        )
        self.pod = self.get_pod()
        if self.target.container is None:
            # Every later exec and log names the container the server was found in.
            self.target = KubeTarget(
                target.namespace, target.pod, self.pod.container, target.kubeconfig, target.context
            )
        # GPUs: nvidia-smi in the pod (it sees only the GPUs it was given); the log: the
        # kubelet's, asked with kubectl on the machine that runs it.
        self.reach = HostReach(log_command=self.target.log_command())
        self.machine: Transport | None = outer

    def kubectl(self, argv: list[str], *, timeout: float = 30.0) -> CommandResult:
        try:
            return self.outer.run(argv, timeout=timeout)
        except TransportError as e:
            if "command not found" in str(e):
                raise HostUnreachable(f"{self.host}: kubectl is not installed here") from None
            raise

    def _get(self, kind: str, name: str) -> bytes:
        res = self.kubectl(self.target.get_argv(kind, name))
        if not res.ok:
            first = res.stderr.decode("utf-8", "replace").strip().splitlines()[:1]
            why = first[0][:200] if first else f"exit {res.returncode}"
            raise HostUnreachable(f"{self.host}: kubectl get {kind} {name}: {why}")
        return res.stdout

    def get_pod(self) -> PodInfo:
        return parse_pod(self._get("pod", self.target.pod), self.target.pod, self.target.container)

    def owner(self) -> tuple[Owner, dict[str, Any]] | None:
        """The object a user edits to change this pod (followed up to three owners)."""
        owners = self.pod.owners
        for _ in range(3):
            if not owners:
                return None
            first = owners[0]
            obj = _load(self._get(_resource(first), first.name), f"{first.kind} {first.name}")
            up = owners_of(obj)
            if first.kind in TEMPLATE_PATHS and not (
                first.kind in INTERMEDIATE and any(o.kind in TEMPLATE_PATHS for o in up)
            ):
                return first, obj
            owners = up
        return None

    def launch_argv(self) -> list[str]:
        return redact_argv(self.pod.argv)

    def launch_env(self) -> dict[str, str]:
        return dict(self.pod.env)

    # -- commands -------------------------------------------------------------------------

    def run(
        self, argv: list[str], *, timeout: float = 30.0, on_stderr: StderrLines | None = None
    ) -> CommandResult:
        return self.outer.run(
            self.target.exec_argv(bounded_on_host(argv, timeout)),
            timeout=timeout + 10,
            on_stderr=on_stderr,
        )

    def run_stream(self, argv: list[str], *, timeout: float = 300.0) -> Iterator[bytes]:
        return self.outer.run_stream(
            self.target.exec_argv(bounded_on_host(argv, timeout)), timeout=timeout + 10
        )

    def write_file(
        self,
        path: str,
        data: bytes,
        *,
        mode: int = 0o644,
        expect: FileId | None = None,
        owner: tuple[int, int] | None = None,
    ) -> FileId | None:
        raise Refused(f"{self.host}:{path}: a pod's files are never edited: `fix` prints a patch")

    def close(self) -> None:
        self.outer.close()


def _resource(owner: Owner) -> str:
    api = API_OF.get(owner.kind) or owner.api_version.split("/")[0]
    plural = owner.kind.lower()
    return f"{plural}.{api}" if owner.kind in API_OF and api else plural


def patch_ops(
    owner: Owner, obj: dict[str, Any], pod: PodInfo, new_argv: list[str]
) -> list[dict[str, Any]]:
    """A JSON patch (RFC 6902) of the owner's pod template(s) that makes the server
    container run `new_argv`: `args` when the command stays, else `command` and `args`."""
    if new_argv[: len(pod.command)] == pod.command and pod.command:
        changes = {"args": new_argv[len(pod.command) :]}
    else:
        changes = {"command": new_argv, "args": []}
    ops: list[dict[str, Any]] = []
    for template in TEMPLATE_PATHS.get(owner.kind, ()):
        node: Any = obj
        for key in template.strip("/").split("/"):
            node = node.get(key) if isinstance(node, dict) else None
        containers = node.get("spec", {}).get("containers") if isinstance(node, dict) else None
        if not isinstance(containers, list):
            continue
        names = [c.get("name") if isinstance(c, dict) else None for c in containers]
        if pod.container not in names:
            continue
        i = names.index(pod.container)
        for key, value in changes.items():
            ops.append(
                {
                    "op": "add",  # `add` replaces an existing member and creates a missing one
                    "path": f"{template}/spec/containers/{i}/{key}",
                    "value": value,
                }
            )
    return ops


def patch_command(target: KubeTarget, owner: Owner, ops: list[dict[str, Any]]) -> list[str]:
    """The `kubectl patch` the user runs (the doctor never does)."""
    return [
        *target.base(),
        "patch",
        _resource(owner),
        owner.name,
        "--type=json",
        f"--patch={json.dumps(ops, separators=(',', ':'))}",
    ]
