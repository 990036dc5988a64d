"""A container's disk kept as an image (`commit`) and run again (`config_image`), against real
Podman: everything written in the container is there, mounts are not part of it, the process
is the renter's image's own (not the platform's entrypoint baked in by the commit), and with
its SSH keys sshd answers again."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

from cardhour.runtime.base import LABEL_HOST, ContainerSpec, Mount, RuntimeFailure
from cardhour.runtime.podman import PodmanRuntime

from .conftest import PYTORCH, wait_for
from .test_podman import LOOPBACK, Names


def test_a_kept_disk_runs_again_with_its_files_and_its_images_process(
    runtime: PodmanRuntime, names: Names, tmp_path: Path
) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "key")], check=True
    )
    keys = (tmp_path / "key.pub").read_text()
    shared = tmp_path / "mounted"
    shared.mkdir()
    first, second = names(), names()
    disk = f"localhost/cardhour-disk/t{uuid.uuid4().hex[:10]}:latest"
    try:
        runtime.run(
            ContainerSpec(
                name=first,
                image=PYTORCH,
                labels={LABEL_HOST: "disk-test-host"},
                ssh_keys=keys,
                publish_address=LOOPBACK,
                mounts=(Mount(str(shared), "/mnt/outside", read_only=False),),
            )
        )
        wait_for(lambda: "Server listening" in runtime.logs(first))
        code, _ = runtime.exec(
            first, ["sh", "-c", "echo kept > /root/work.txt && echo there > /mnt/outside/x"]
        )
        assert code == 0
        runtime.stop(first)
        runtime.commit(first, disk)
        runtime.remove(first)
        assert (runtime.image_labels(disk) or {}).get(LABEL_HOST) == "disk-test-host"
        repository = disk.rsplit("/", 1)[0]
        assert disk in runtime.images(repository, {LABEL_HOST: "disk-test-host"})
        assert disk not in runtime.images(repository, {LABEL_HOST: "another-host"})

        status = runtime.run(
            ContainerSpec(
                name=second,
                image=disk,
                config_image=PYTORCH,
                ssh_keys=keys,
                publish_address=LOOPBACK,
            )
        )
        wait_for(lambda: "Server listening" in runtime.logs(second))
        assert status.ports[22]
        code, out = runtime.exec(second, ["sh", "-c", "cat /root/work.txt; ls /mnt/outside"])
        assert (code, out) == (0, "kept\n")  # the disk, not the mount
        # one entrypoint, the platform's, in front of the image's own process (the commit
        # recorded the first container's wrapped process as the disk's ENTRYPOINT/CMD)
        args = runtime._call(["container", "inspect", "--format", "{{json .Args}}", second])
        assert args.stdout.count("entrypoint.sh") == 1, args.stdout
        baked = runtime._call(["image", "inspect", "--format", "{{json .Config.Cmd}}", disk])
        assert "entrypoint.sh" in baked.stdout  # what `config_image` keeps out
    finally:
        runtime.remove(second)
        runtime.remove_image(disk)
    assert runtime.image_labels(disk) is None
    runtime.remove_image(disk)  # gone already: silent
    try:
        runtime.commit(first, disk)
    except RuntimeFailure as exc:
        assert "cannot keep the disk" in str(exc)
    else:
        raise AssertionError("a commit of a removed container must fail")


def test_a_deep_disk_is_flattened_into_one_layer_with_its_files_and_config(
    runtime: PodmanRuntime, names: Names
) -> None:
    box = names()
    disk = f"localhost/cardhour-disk/t{uuid.uuid4().hex[:10]}:latest"
    try:
        runtime.run(ContainerSpec(name=box, image=PYTORCH, labels={LABEL_HOST: "squash-host"}))
        code, _ = runtime.exec(box, ["sh", "-c", "echo kept > /root/work.txt"])
        assert code == 0
        runtime.stop(box)
        runtime.commit(box, disk)
        runtime.remove(box)
        deep = runtime.image_layers(disk)
        assert deep is not None and deep > 1
        config = runtime.image_config(disk)
        runtime.squash(disk)
        assert runtime.image_layers(disk) == 1
        assert runtime.image_config(disk) == config
        assert (runtime.image_labels(disk) or {}).get(LABEL_HOST) == "squash-host"
        assert runtime.run_once(disk, ["cat", "/root/work.txt"]) == (0, "kept\n")
        assert runtime.image_layers("localhost/cardhour-disk/none:here") is None
    finally:
        runtime.remove(box)
        runtime.remove_image(disk)
