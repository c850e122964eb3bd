"""The fixed configs as Kubernetes objects: each proxy kind's manifests (`ProxyKind.kubernetes`),
rendered from its fixed settings, and their offline validation against the published schemas."""
