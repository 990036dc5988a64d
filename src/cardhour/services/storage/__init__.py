"""Storage: persistent volumes — create, attach to an instance at launch, detach when it ends,
delete through the host that holds the data, and the charge for the GB-hours they are kept
(docs/dev/storage.md).
"""
