"""`core.cluster`: ranks, hostnames, hostfile and the distributed-job environment."""

from __future__ import annotations

from cardhour.core import cluster


def test_two_nodes_with_infiniband() -> None:
    nodes = cluster.layout(
        "llm",
        {"bj1-h100-07": list(range(8)), "bj1-h100-03": list(range(8))},
        {"bj1-h100-03": "10.0.0.3", "bj1-h100-07": "10.0.0.7"},
        {"bj1-h100-03": 8, "bj1-h100-07": 8},
    )
    assert [(n.rank, n.role, n.hostname, n.node, n.address) for n in nodes] == [
        (0, "head", "llm", "bj1-h100-03", "10.0.0.3"),
        (1, "worker", "llm-worker1", "bj1-h100-07", "10.0.0.7"),
    ]
    assert cluster.hostfile(nodes) == "llm slots=8\nllm-worker1 slots=8\n"
    assert cluster.environment(nodes, 1) == {
        "MASTER_ADDR": "llm",
        "MASTER_PORT": "29500",
        "NNODES": "2",
        "NODE_RANK": "1",
        "NPROC_PER_NODE": "8",
        "WORLD_SIZE": "16",
        "NCCL_IB_HCA": ",".join(f"mlx5_{k}" for k in range(8)),
    }


def test_one_node_without_infiniband() -> None:
    nodes = cluster.layout("box", {"wh1-4090-01": [2, 3]}, {}, {})
    assert nodes[0].address == "wh1-4090-01" and nodes[0].gpus == 2
    env = cluster.environment(nodes, 0)
    assert env["NCCL_IB_DISABLE"] == "1" and env["WORLD_SIZE"] == "2" and "NCCL_IB_HCA" not in env
