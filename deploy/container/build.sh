#!/bin/sh
# Builds the gateway's image from scratch, with no image registry: the release binary and
# the host's own copies of what it loads (the libraries `ldd` lists, with the dynamic
# loader, and the CA bundle) go into a fresh build context, then `podman build` (or
# docker/buildah, by $BUILDER) makes the image from deploy/container/Containerfile.
#
#   deploy/container/build.sh [TAG]      # TAG defaults to localhost/toolmend:latest
#
# TOOLMEND_BIN=path uses that binary instead of building target/release/toolmend.
# KEEP_DEBUG=1 leaves its debug line tables in (stripped by default, with binutils' strip).
# BUILDER=podman (default) | buildah | docker: each takes `build -t TAG -f FILE DIR`.
# Run it from anywhere in the repo.
set -eu

tag=${1:-localhost/toolmend:latest}
builder=${BUILDER:-podman}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

if [ -z "${TOOLMEND_BIN:-}" ]; then
    (cd "$repo" && cargo build --release --locked -p toolmend-cli)
    TOOLMEND_BIN=$repo/target/release/toolmend
fi
[ -x "$TOOLMEND_BIN" ] || { echo "build.sh: $TOOLMEND_BIN is not an executable" >&2; exit 1; }
ca=/etc/ssl/certs/ca-certificates.crt
[ -f "$ca" ] || { echo "build.sh: $ca is missing (apt-get install -y ca-certificates)" >&2; exit 1; }

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
root=$ctx/rootfs
mkdir -p "$root/usr/local/bin" "$root/etc/ssl/certs" "$root/tmp"
chmod 1777 "$root/tmp"
cp "$TOOLMEND_BIN" "$root/usr/local/bin/toolmend"
# The release profile keeps line tables (debug = "line-tables-only"): the binary is 168 MB
# with them, 43 MB without (Debian 12, x86_64). The image's copy drops them and keeps the
# symbols (a panic's backtrace still names its functions); KEEP_DEBUG=1 keeps them.
if [ -z "${KEEP_DEBUG:-}" ] && command -v strip >/dev/null; then
    strip --strip-debug "$root/usr/local/bin/toolmend"
fi
cp "$ca" "$root/etc/ssl/certs/ca-certificates.crt"

# Every absolute path ldd prints: the shared libraries and the dynamic loader, copied
# (symlinks followed) to the same paths inside the image.
libs=$(ldd "$TOOLMEND_BIN" | grep -o '/[^ ]*' | sort -u)
[ -n "$libs" ] || { echo "build.sh: ldd listed no libraries (a static binary?); nothing to copy" >&2; }
for lib in $libs; do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
done

# The user the gateway runs as (USER 65532 in the Containerfile); no shell, no home.
printf 'root:x:0:0:root:/:/sbin/nologin\ntoolmend:x:65532:65532:toolmend:/:/sbin/nologin\n' \
    > "$root/etc/passwd"
printf 'root:x:0:\ntoolmend:x:65532:\n' > "$root/etc/group"

cp "$here/Containerfile" "$ctx/Containerfile"
echo "build.sh: $(echo "$libs" | wc -l) librar(ies) from ldd:" $libs
$builder build -t "$tag" -f "$ctx/Containerfile" "$ctx"
echo "build.sh: built $tag"
