"""The host agent (`cardhour agent`): runs on each GPU server, dials out to the control plane,
reports the server's inventory and containers, and converges the containers to the ones the
control plane wants there. A reconciler on the host: desired state in, actual state out."""
