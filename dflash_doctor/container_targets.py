"""Host targets that name a container: `docker://...` and `k8s://...` on the command line.

- `docker://CONTAINER`: a container of this machine's Docker engine;
- `docker://[user@]host[:port]/CONTAINER`: a container of the engine on an SSH host;
- `k8s://[CONTEXT@]NAMESPACE/POD[/CONTAINER]` (also `kubernetes://`): a pod, through `kubectl`
  with the user's kubeconfig (KUBECONFIG, or an inventory entry's `kubeconfig:`) and context
  (the current one, the CONTEXT given, or an inventory entry's `kube_context:`).

Each name is checked here (and again by its transport): none may start with '-', so none can
be read as an option by `docker` or `kubectl`.
"""

from __future__ import annotations

import re

from dflash_doctor.errors import UsageError

DOCKER_SCHEME = "docker://"
K8S_SCHEMES = ("k8s://", "kubernetes://")
# Kubernetes object names: DNS-1123 subdomain (pods), label (namespaces, containers).
K8S_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
DOCKER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,254}")


def is_container_target(text: str) -> bool:
    return text.startswith((DOCKER_SCHEME, *K8S_SCHEMES))


def check_k8s_name(name: str, what: str) -> str:
    if not K8S_NAME.fullmatch(name):
        raise UsageError(f"{name!r}: not a Kubernetes {what} name (lower-case DNS-1123)")
    return name


def parse_container_target(text: str) -> dict[str, str]:
    """The HostSpec fields a `docker://` or `k8s://` target sets (name included)."""
    if text.startswith(DOCKER_SCHEME):
        rest = text[len(DOCKER_SCHEME) :]
        address, _, container = rest.rpartition("/")
        if not DOCKER_NAME.fullmatch(container):
            raise UsageError(
                f"{text}: give docker://CONTAINER or docker://[user@]host[:port]/CONTAINER "
                "(a container name: letters, digits, '_', '.', '-', not starting with '-')"
            )
        if address.startswith("-") or "/" in address:
            raise UsageError(f"{text}: {address!r} is not an SSH host")
        fields = {"name": text, "container": container}
        if address:
            fields["address"] = address
        return fields
    for scheme in K8S_SCHEMES:
        if text.startswith(scheme):
            context, _, path = text[len(scheme) :].rpartition("@")
            parts = path.split("/")
            if len(parts) not in (2, 3) or not all(parts):
                raise UsageError(f"{text}: give k8s://[CONTEXT@]NAMESPACE/POD[/CONTAINER]")
            if context.startswith("-") or any(c in context for c in "\0\n"):
                raise UsageError(f"{text}: {context!r} is not a kubeconfig context name")
            fields = {
                "name": text,
                "namespace": check_k8s_name(parts[0], "namespace"),
                "pod": check_k8s_name(parts[1], "pod"),
            }
            if len(parts) == 3:
                fields["container"] = check_k8s_name(parts[2], "container")
            if context:
                fields["kube_context"] = context
            return fields
    raise UsageError(f"{text}: not a docker:// or k8s:// target")
