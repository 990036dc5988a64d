"""Container runtimes on a GPU server: the one interface (`base`) and its engines (Podman first,
Docker where its daemon runs). Used by the host agent (`cardhour.agent`) and nothing in the
control plane: containers run where the GPUs are."""
