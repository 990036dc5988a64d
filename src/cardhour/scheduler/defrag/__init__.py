"""The defragmentation planner: which movable containers to move, and where, so that an 8-GPU
container, a bare-metal node or a gang fits. Pure: it reads a `FleetState` and changes nothing.

`plan.py`: `plan_defrag` (the cheapest verified plan, or why none exists) and `apply_plan`;
`evictions.py`: per node, the cheapest containers whose eviction makes room.
"""
