# Stand-in image for machines without a registry: `make images-offline` fills rootfs/ with one
# host binary, the shared libraries `ldd` lists for it and a minimal /etc, then builds this.
# No base image, so nothing is pulled; the binary is the one the host runs (same version).
FROM scratch
COPY rootfs/ /
# scratch has no environment at all: give the binaries a PATH and a HOME.
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp
# The runtime stops containers with SIGTERM through `--init`; say so for `docker stop` users too.
STOPSIGNAL SIGTERM
