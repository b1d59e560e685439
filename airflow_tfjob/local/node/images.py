"""Image pulls as the kubelet reports them, for the one kind of image this node knows it cannot pull.

The runner never pulls (a container's command runs on this host), so every image "is present", except
an image whose registry host ends in `.invalid`: that top-level domain is reserved (RFC 2606) and never
resolves, so a real node's pull fails on the registry's DNS lookup. The runner then reports what the
kubelet and containerd report: the container waits with reason ErrImagePull (the pull's error as
message), then ImagePullBackOff (`Back-off pulling image "<ref>"`) while it backs off, and tries again;
events Pulling, Failed (the error, then `Error: ErrImagePull`), BackOff and Failed
(`Error: ImagePullBackOff`). The pod stays Pending until it is deleted.
"""

from __future__ import annotations

UNPULLABLE_SUFFIX = ".invalid"


def _split(image: str) -> tuple[str, str, str] | None:
    """(registry host, repository path, tag) of an image with an explicit registry, else None."""
    first, _, rest = image.partition("/")
    if not rest or not ("." in first or ":" in first or first == "localhost"):
        return None
    path, tag = rest, "latest"
    if "@" in rest:
        path, tag = rest.split("@", 1)
    elif ":" in rest.rsplit("/", 1)[-1]:
        path, tag = rest.rsplit(":", 1)
    return first, path, tag


def pull_error(image: str | None) -> str | None:
    """The error a pull of `image` ends with on this node, or None if the image is there."""
    parts = _split(str(image or ""))
    if parts is None:
        return None
    host, path, tag = parts
    if not host.split(":")[0].endswith(UNPULLABLE_SUFFIX):
        return None
    ref = f"{host}/{path}{'@' if tag.startswith('sha256:') else ':'}{tag}"
    return (
        f'rpc error: code = Unknown desc = failed to pull and unpack image "{ref}": failed to resolve '
        f'reference "{ref}": failed to do request: Head "https://{host}/v2/{path}/manifests/{tag}": '
        f"dial tcp: lookup {host.split(':')[0]}: no such host"
    )
