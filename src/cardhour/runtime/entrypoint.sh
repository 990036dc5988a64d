#!/bin/sh
# cardhour's entrypoint for containers with SSH (installed and mounted read-only by the runtime,
# cardhour/runtime/podman.py). Usage: entrypoint.sh [ARGV...]
# - installs /.cardhour/authorized_keys as root's only keys (/root/.ssh/authorized_keys, 0600),
#   and the container's environment for ssh sessions (/root/.ssh/environment);
# - makes an ed25519 host key when the image has none (per container: images carry none);
# - starts sshd in the background (key login only) when the image has /usr/sbin/sshd;
# - then execs ARGV (the runtime's `process_argv`), or waits until stopped when there is none
#   (PID 1 is podman's init: SIGTERM works).
# With a read-only root filesystem the keys go under /run (a tmpfs) instead. On the host's
# network (a cluster node) sshd listens on $CARDHOUR_SSH_LISTEN (address:port) instead of :22.
keys=/.cardhour/authorized_keys
if [ -x /usr/sbin/sshd ]; then
  options="-o PasswordAuthentication=no -o PermitRootLogin=prohibit-password"
  if [ -n "${CARDHOUR_SSH_LISTEN:-}" ]; then  # on the host's network: its own address:port
    options="$options -o ListenAddress=$CARDHOUR_SSH_LISTEN"
  fi
  if mkdir -p /root/.ssh 2>/dev/null && cp "$keys" /root/.ssh/authorized_keys 2>/dev/null; then
    chmod 700 /root/.ssh && chmod 600 /root/.ssh/authorized_keys
    # the container's environment (the renter's variables, a cluster's job) in ssh sessions too
    env | grep -v -E '^(HOME|PWD|SHLVL|HOSTNAME|OLDPWD|_)=' >/root/.ssh/environment || true
    options="$options -o PermitUserEnvironment=yes"
  else
    mkdir -p /run/cardhour && cp "$keys" /run/cardhour/authorized_keys
    chmod 600 /run/cardhour/authorized_keys
    options="$options -o AuthorizedKeysFile=/run/cardhour/authorized_keys"
  fi
  if ! ls /etc/ssh/ssh_host_*_key >/dev/null 2>&1; then
    # one ed25519 key, in milliseconds: `ssh-keygen -A` also makes a 3072-bit RSA key, which
    # takes seconds in a container holding a quarter of a core
    if ! ssh-keygen -q -t ed25519 -N "" -f /etc/ssh/ssh_host_ed25519_key >/dev/null 2>&1; then
      mkdir -p /run/cardhour  # /etc/ssh is read-only
      ssh-keygen -q -t ed25519 -N "" -f /run/cardhour/ssh_host_ed25519_key
      options="$options -h /run/cardhour/ssh_host_ed25519_key"
    fi
  fi
  mkdir -p /run/sshd
  # shellcheck disable=SC2086 # the options are words without spaces
  /usr/sbin/sshd -D -e $options &
else
  echo "cardhour: this image has no /usr/sbin/sshd: SSH is not available in this container" >&2
fi
[ $# -gt 0 ] || set -- sleep infinity
exec "$@"
