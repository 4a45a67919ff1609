"""Opening a container host (Docker or Kubernetes) over the machine its tools run on."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dflash_doctor.errors import DoctorError
from dflash_doctor.transport.base import Transport

if TYPE_CHECKING:
    from dflash_doctor.hosts import HostSpec


def open_container(spec: HostSpec, outer: Transport) -> Transport:
    """`spec`'s pod (kubectl) or container (docker) on `outer`'s machine; `outer` is closed
    when the container cannot be opened."""
    try:
        if spec.connection.pod is not None:
            from dflash_doctor.transport.kubernetes import KubernetesTransport, KubeTarget

            target = KubeTarget(
                namespace=spec.connection.namespace or "default",
                pod=spec.connection.pod,
                container=spec.connection.container,
                kubeconfig=spec.connection.kubeconfig,
                context=spec.connection.kube_context,
            )
            return KubernetesTransport(spec.name, outer, target)
        from dflash_doctor.transport.docker import DockerTransport

        assert spec.connection.container is not None
        return DockerTransport(spec.name, outer, spec.connection.container)
    except DoctorError:
        outer.close()
        raise
