"""Parsers of what GPU servers print: `nvidia-smi topo -m`, `ibstat`, and nccl-tests'
`all_reduce_perf`.
"""
