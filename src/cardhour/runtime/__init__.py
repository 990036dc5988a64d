"""Container runtimes: the one interface (`base`) and its engines (Podman first, Docker where
its daemon runs). Used by the host agent (`cardhour.agent`: renters' containers run where the
GPUs are) and by the marketplace's replica launcher (`backends.apps.container`: app replicas on
the control plane's machine), nothing else."""
