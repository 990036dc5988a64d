"""Podman through its CLI (`podman inspect` / `podman ps` JSON): the agent's engine.

How a `ContainerSpec` becomes `podman create` + `podman start` (docs/dev/runtime.md):
- always `--init` (PID 1 forwards SIGTERM: stop is quick), the labels, `--hostname`,
  `--add-host` per `hosts`, `--env-file` (a 0600 file, deleted once read: no value on a command
  line), `--device` per CDI name, `--cpus`, `--memory <n>m`,
  `--mount`s, `--read-only`, `--network` (`private`: a network of the container's own name,
  made first with netavark's `isolate`, removed with it), `--user`, `--pids-limit`, and when
  `unprivileged` `--cap-drop all --security-opt no-new-privileges`;
- each port and, with `ssh_keys`, 22 published as `-p <publish_address>::<port>`: podman picks
  a free host port, `inspect` reports it;
- what runs is `engine_cli.process_argv`: the image's ENTRYPOINT, then `sh -c <command>`, or
  the image's CMD when there is no command, or `sleep infinity` when that CMD is empty or a
  bare shell;
- with `ssh_keys` that process runs behind `entrypoint.sh` (installed into `entrypoint_dir` and
  mounted read-only with a file of the keys at `/.cardhour/`), which starts sshd first.

One `podman run --detach` creates and starts it, after one `image inspect` for the image's
ENTRYPOINT and CMD (a pull only when that fails); a name in use is refused by `run` and its
status returned. Image refs under `localhost/` are local
builds: they are never pulled (a pull would retry a registry at https://localhost for 3 s).
Every podman call gets `CONTAINERS_CONF=conf` when set.
"""

from __future__ import annotations

import builtins
import json
import os
import shutil
import subprocess
from dataclasses import replace
from importlib import resources
from pathlib import Path

from cardhour.runtime import env_files
from cardhour.runtime.base import (
    PRIVATE,
    ContainerRuntime,
    ContainerSpec,
    ContainerState,
    ContainerStatus,
    RuntimeFailure,
)
from cardhour.runtime.engine_cli import (
    gone,
    last_line,
    parse_inspect,
    parse_ps,
    process_argv,
)
from cardhour.runtime.podman_images import PodmanImages

#: where the runtime's files (entrypoint, keys) live inside a container
INNER_DIR = "/.cardhour"
#: folders Podman 4.3 reads CDI specs from without being told
DEFAULT_CDI_DIRS = (Path("/etc/cdi"), Path("/var/run/cdi"), Path("/run/cdi"))


class PodmanRuntime(PodmanImages, ContainerRuntime):
    """Podman on this host. `conf`: a containers.conf given to every call as CONTAINERS_CONF.
    `cdi_dirs`: folders of CDI specs; Podman 4.3 reads only /etc/cdi and /var/run/cdi, so other
    folders need a Podman with `--cdi-spec-dir` (RuntimeFailure at the first call otherwise).
    `entrypoint_dir`: where the SSH entrypoint and the keys files are written (root-owned)."""

    name = "podman"

    def __init__(
        self,
        binary: str = "podman",
        conf: Path | None = None,
        cdi_dirs: tuple[Path, ...] = (),
        entrypoint_dir: Path = Path("/var/lib/cardhour/runtime"),
        call_timeout: int = 120,
    ) -> None:
        self.binary = binary
        self.conf = Path(conf).resolve() if conf is not None else None
        self.cdi_dirs = tuple(Path(d) for d in cdi_dirs)
        self.entrypoint_dir = Path(entrypoint_dir)
        self.call_timeout = call_timeout
        self._global: list[str] | None = None

    # -- the CLI -----------------------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.conf is not None:
            env["CONTAINERS_CONF"] = str(self.conf)
        return env

    def _global_args(self) -> list[str]:
        if self._global is None:
            extra = [d for d in self.cdi_dirs if d not in DEFAULT_CDI_DIRS]
            if not extra:
                self._global = []
            else:
                help_text = self._call(["--help"], global_args=False).stdout
                if "--cdi-spec-dir" not in help_text:
                    raise RuntimeFailure(
                        f"{self.binary} has no --cdi-spec-dir: put CDI specs in /etc/cdi or "
                        f"/var/run/cdi, not {', '.join(map(str, extra))}"
                    )
                self._global = [f"--cdi-spec-dir={d}" for d in self.cdi_dirs]
        return self._global

    def _call(
        self, args: list[str], timeout: int | None = None, global_args: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run the engine; the result whatever its exit code. RuntimeFailure when the binary is
        missing or the call outlives `timeout`."""
        argv = [self.binary, *(self._global_args() if global_args else []), *args]
        try:
            return subprocess.run(
                argv,
                capture_output=True,
                text=True,
                env=self._env(),
                timeout=timeout or self.call_timeout,
                check=False,
            )
        except FileNotFoundError as exc:
            raise RuntimeFailure(f"{self.binary} is not installed") from exc
        except subprocess.TimeoutExpired as exc:
            raise RuntimeFailure(f"{self.binary} {args[0]} took over {exc.timeout:g}s") from exc

    def _ok(self, args: list[str], timeout: int | None = None) -> str:
        """Run the engine; its stdout, or RuntimeFailure with its last stderr line."""
        result = self._call(args, timeout)
        if result.returncode != 0:
            raise RuntimeFailure(last_line(result.stderr or result.stdout))
        return result.stdout

    # -- the contract --------------------------------------------------------------------------

    def available(self) -> bool:
        if shutil.which(self.binary) is None:
            return False
        try:
            return self._call(["version", "--format", "json"], timeout=30).returncode == 0
        except RuntimeFailure:
            return False

    def run_once(self, image: str, argv: builtins.list[str], timeout: int = 60) -> tuple[int, str]:
        run = ["run", "--rm", "--network", "none", "--read-only", "--entrypoint", argv[0], image]
        result = self._call([*run, *argv[1:]], timeout=timeout)
        if self.engine_refused(result):
            raise RuntimeFailure(last_line(result.stderr))
        return result.returncode, result.stdout + result.stderr

    def run(self, spec: ContainerSpec) -> ContainerStatus:
        """As the contract, in three engine calls when the image is here: `image inspect`,
        `run --detach` (create and start), `inspect`. A name that exists is not looked up
        first: `run` refuses it ("already in use") and its status is returned."""
        if spec.config_image is not None:  # a kept disk, with its own image's ENTRYPOINT/CMD
            self.ensure_image(spec.image)
        entrypoint, cmd = self.image_config(spec.config_image or spec.image)
        if spec.network == PRIVATE:
            self._private_network(spec.name, spec.labels)
        try:
            created = self._call(["run", "--detach", *self.create_args(spec, entrypoint, cmd)])
        except BaseException as exc:
            if spec.network == PRIVATE and self.inspect(spec.name) is None:
                self._remove_network(spec.name)  # no container holds it: not left behind
            if isinstance(exc, OSError):  # its keys or env file
                raise RuntimeFailure(f"cannot prepare {spec.name}: {exc}") from exc
            raise
        finally:
            self._env_file(spec.name).unlink(missing_ok=True)  # read at create: a secret less
        status = self.inspect(spec.name)
        if created.returncode != 0 and "already in use" in created.stderr and status is not None:
            return status  # it was there: left as it is
        if created.returncode != 0:
            if status is None:
                self._forget(spec.name)
                if spec.network == PRIVATE:
                    self._remove_network(spec.name)
                raise RuntimeFailure(last_line(created.stderr))
            if not status.error and status.state != ContainerState.RUNNING:
                return replace(status, error=last_line(created.stderr))
        if status is None:
            raise RuntimeFailure(f"container {spec.name} vanished as it started")
        return status

    def create_args(self, spec: ContainerSpec, entrypoint: list[str], cmd: list[str]) -> list[str]:
        """The `create`/`run` arguments for `spec`, whose image declares `entrypoint` and `cmd`
        (writes its keys file when it has ssh_keys, and its env file: `run` deletes that once
        the engine has read it)."""
        args = ["--name", spec.name, "--init"]
        for key, value in sorted(spec.labels.items()):
            args += ["--label", f"{key}={value}"]
        if spec.hostname:
            args += ["--hostname", spec.hostname]
        for host, address in sorted(spec.hosts.items()):
            args += ["--add-host", f"{host}:{address}"]
        if spec.env:  # in a file, not on the engine's command line (`env_files`)
            env_file = self._env_file(spec.name)
            env_files.write(env_file, spec.env)
            args += ["--env-file", str(env_file)]
        args += self.device_args(spec.devices)
        if spec.cpus is not None:
            args += ["--cpus", f"{spec.cpus:g}"]
        if spec.memory_mb is not None:
            args += ["--memory", f"{spec.memory_mb}m"]
        if spec.network == "host":
            if spec.ssh_keys and spec.ssh_port:
                args += ["--env", f"CARDHOUR_SSH_LISTEN={spec.publish_address}:{spec.ssh_port}"]
        else:
            ports = sorted(set(spec.ports) | ({22} if spec.ssh_keys else set()))
            for port in ports:
                args += ["--publish", f"{spec.publish_address}::{port}"]
        for mount in spec.mounts:
            if "," in mount.source + mount.target:
                raise RuntimeFailure(f"mount paths may not contain ',': {mount.source}")
            kind = "volume" if mount.volume else "bind"
            ro = ",ro=true" if mount.read_only else ""
            args += ["--mount", f"type={kind},src={mount.source},dst={mount.target}{ro}"]
        if spec.read_only_root:
            args.append("--read-only")
        if spec.network:
            args += ["--network", spec.name if spec.network == PRIVATE else spec.network]
        if spec.user:
            args += ["--user", spec.user]
        if spec.pids_limit is not None:
            args += ["--pids-limit", str(spec.pids_limit)]
        if spec.unprivileged:
            args += ["--cap-drop", "all", "--security-opt", "no-new-privileges"]
        argv = process_argv(entrypoint, cmd, spec.command)
        if spec.ssh_keys:
            script, keys = self._install_ssh(spec.name, spec.ssh_keys)
            for source, target in ((script, "entrypoint.sh"), (keys, "authorized_keys")):
                args += ["--mount", f"type=bind,src={source},dst={INNER_DIR}/{target},ro=true"]
            argv = ["/bin/sh", f"{INNER_DIR}/entrypoint.sh", *argv]
        return [*args, "--entrypoint", argv[0], spec.image, *argv[1:]]

    #: options of a private network: isolated from every other isolated network (netavark's
    #: `isolate`, Podman 4.3+; Docker isolates user-defined bridges without being asked)
    private_network_opts: tuple[str, ...] = ("--opt", "isolate=true")

    def _private_network(self, name: str, labels: dict[str, str]) -> None:
        """The container's own network, named as it is (made once; kept if it exists)."""
        label_args = [a for k, v in sorted(labels.items()) for a in ("--label", f"{k}={v}")]
        made = self._call(["network", "create", *self.private_network_opts, *label_args, name])
        if made.returncode != 0 and "already exists" not in made.stderr.lower():
            raise RuntimeFailure(last_line(made.stderr))

    def _remove_network(self, name: str) -> None:
        """Remove the private network of container `name`; silent when it has none."""
        result = self._call(["network", "rm", name])
        text = result.stderr.lower()
        gone = ("unable to find", "not found", "no such network")
        if result.returncode != 0 and not any(words in text for words in gone):
            raise RuntimeFailure(last_line(result.stderr))

    def tidy(self, labels: dict[str, str]) -> None:
        """As the contract: every env file older than two call timeouts (`run` deletes its
        own as soon as the engine has read it, within one), then `network prune` by the
        labels (a failure of that leaves the files swept)."""
        env_files.sweep(self._env_file("-").parent, 2 * self.call_timeout)
        filters = [a for k, v in sorted(labels.items()) for a in ("--filter", f"label={k}={v}")]
        self._ok(["network", "prune", "--force", *filters])

    def device_args(self, devices: tuple[str, ...]) -> list[str]:
        """Engine arguments giving exactly these CDI devices."""
        return [arg for name in devices for arg in ("--device", name)]

    def _install_ssh(self, name: str, keys: str) -> tuple[Path, Path]:
        """Write the entrypoint (from the package) and `name`'s keys file; their host paths."""
        self.entrypoint_dir.mkdir(parents=True, exist_ok=True)
        script = resources.files("cardhour.runtime").joinpath("entrypoint.sh").read_text()
        entrypoint = self.entrypoint_dir / "entrypoint.sh"
        if not entrypoint.exists() or entrypoint.read_text() != script:
            tmp = entrypoint.with_suffix(".tmp")
            tmp.write_text(script)
            tmp.chmod(0o755)
            tmp.replace(entrypoint)
        keys_file = self._keys_file(name)
        keys_file.parent.mkdir(exist_ok=True)
        keys_file.write_text(keys.strip() + "\n")
        keys_file.chmod(0o644)
        return entrypoint, keys_file

    def _env_file(self, name: str) -> Path:
        return self.entrypoint_dir / "env" / name

    def _keys_file(self, name: str) -> Path:
        return self.entrypoint_dir / "keys" / name

    def _forget(self, name: str) -> None:
        self._keys_file(name).unlink(missing_ok=True)

    def inspect(self, name: str) -> ContainerStatus | None:
        result = self._call(["container", "inspect", name])
        if result.returncode != 0:
            if gone(result.stderr):
                return None
            raise RuntimeFailure(last_line(result.stderr))
        data = json.loads(result.stdout)
        return parse_inspect(data[0]) if data else None

    def list(self, labels: dict[str, str]) -> list[ContainerStatus]:
        """One `ps` (the agent lists every pass); an `inspect` only of those not running, for
        the engine's reason (`ps` does not say it)."""
        filters = [arg for k, v in sorted(labels.items()) for arg in ("--filter", f"label={k}={v}")]
        out = self._ok(["ps", "--all", "--format", "json", *filters])
        statuses = [parse_ps(item) for item in json.loads(out or "[]")]
        found = []
        for status in sorted(statuses, key=lambda s: s.name):
            if status.state != ContainerState.RUNNING:
                inspected = self.inspect(status.name)
                if inspected is None:  # it went meanwhile
                    continue
                status = inspected
            found.append(status)
        return found

    def list_names(self, labels: dict[str, str]) -> builtins.list[str]:
        """Names of the containers carrying all of `labels`."""
        filters = [arg for k, v in sorted(labels.items()) for arg in ("--filter", f"label={k}={v}")]
        out = self._ok(["ps", "--all", "--format", "json", *filters])
        return sorted(name for item in json.loads(out or "[]") for name in item["Names"])

    def stop(self, name: str, timeout: int = 10) -> None:
        result = self._call(["stop", "--time", str(timeout), name], timeout=timeout + 60)
        if result.returncode != 0 and not gone(result.stderr):
            raise RuntimeFailure(last_line(result.stderr))

    def remove(self, name: str) -> None:
        result = self._call(["rm", "--force", "--volumes", "--time", "10", name], timeout=90)
        if result.returncode != 0 and not gone(result.stderr):
            raise RuntimeFailure(last_line(result.stderr))
        self._forget(name)
        self._remove_network(name)

    def logs(self, name: str, lines: int = 20) -> str:
        result = self._call(["logs", "--tail", str(lines), name])
        if result.returncode != 0:
            if gone(result.stderr):
                return ""
            raise RuntimeFailure(last_line(result.stderr))
        return result.stdout + result.stderr

    def exec(self, name: str, argv: builtins.list[str], timeout: int = 60) -> tuple[int, str]:
        """As the contract; RuntimeFailure when the container is gone or not running, or the
        command outlives `timeout` (it may still run inside)."""
        result = self._call(["exec", name, *argv], timeout=timeout)
        output = result.stdout + result.stderr
        if self.engine_refused(result):
            raise RuntimeFailure(last_line(result.stderr))
        return result.returncode, output

    def engine_refused(self, result: subprocess.CompletedProcess[str]) -> bool:
        """Whether a failed `exec` is the engine's refusal (gone, not running), not the
        command's own exit: podman exits 125 or 255 with its `Error: ` line last."""
        lines = result.stderr.strip().splitlines()
        return result.returncode in (125, 255) and bool(lines) and lines[-1].startswith("Error: ")
