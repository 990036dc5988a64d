"""What a renter runs on an instance, as pure rules: the image reference (`oci`: the grammar,
the registries a fleet allows) and the command, environment and ports (`spec`).
"""
