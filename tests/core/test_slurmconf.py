"""`core.slurmconf`: the files of one-click Slurm (the daemons read them in
tests/backends/test_slurm_one_click.py)."""

from __future__ import annotations

from cardhour.core.slurmconf import SlurmNode, render, topology


def _node(name: str, leaf: str | None, spine: str | None) -> SlurmNode:
    return SlurmNode(name, f"10.0.0.{len(name)}", 8, "h100", 192, 2_000_000, leaf, spine)


def test_files_for_a_two_leaf_cluster() -> None:
    nodes = [
        _node("llm", "l1", "s1"),
        _node("llm-worker1", "l1", "s1"),
        _node("llm-worker2", "l2", "s1"),
    ]
    files = render("llm", nodes)
    conf = files.slurm_conf.splitlines()
    assert "SlurmctldHost=llm(10.0.0.3)" in conf and "TopologyPlugin=topology/tree" in conf
    worker = "NodeName=llm-worker2 NodeAddr=10.0.0.11 CPUs=192 RealMemory=2000000"
    assert f"{worker} Gres=gpu:h100:8 State=UNKNOWN" in conf
    assert "StateSaveLocation=/var/spool/slurmctld" in conf
    assert files.gres_conf == "AutoDetect=nvml\n"
    assert files.topology_conf == (
        "SwitchName=l1 Nodes=llm,llm-worker1\nSwitchName=l2 Nodes=llm-worker2\n"
        "SwitchName=s1 Switches=l1,l2\n"
    )
    assert set(files.as_dict()) == {"slurm.conf", "gres.conf", "topology.conf"}


def test_one_leaf_and_several_spines() -> None:
    assert topology([_node("a", "l1", "s1"), _node("b", "l1", "s1")]) == "SwitchName=l1 Nodes=a,b\n"
    many = topology([_node("a", "l1", "s1"), _node("b", "l2", "s2"), _node("c", None, None)])
    assert many.splitlines()[-1] == "SwitchName=core Switches=fabric,s1,s2"


def test_stand_in_gpus_and_a_base_directory() -> None:
    files = render("t", [_node("a", None, None)], base="/tmp/x", gpu_files="/tmp/x/dev/nvidia[0-7]")
    assert (
        files.gres_conf
        == "AutoDetect=off\nNodeName=a Name=gpu Type=h100 File=/tmp/x/dev/nvidia[0-7]\n"
    )
    assert "SlurmdSpoolDir=/tmp/x/spool/%n" in files.slurm_conf.splitlines()
