"""Compute: instances and clusters, the scheduling cycle and placement, provisioning claims, the
readiness gate's stages, offers and quotes, defragmentation, auto-stop and the readiness SLA.
"""
