#!/usr/bin/env bash
# Builds the operator's container image without a registry, a base image or a container engine:
# the release binary, the shared libraries it links (as `ldd` lists them) and a non-root user,
# packed as one layer into an archive that both `ctr images import` and `docker load` read (an
# OCI image layout with Docker's manifest.json next to it, as `docker save` writes since 25).
#
#   image/build.sh [--binary PATH] [--tag NAME:TAG]... [--out FILE]
#
# Defaults: target/release/storage-operator (run `cargo build --release -p cli` first), the tags
# localhost/storage-operator:latest and localhost/storage-operator:<version>, and the archive
# target/image/storage-operator.tar. Then, on a node:
#   ctr -n k8s.io images import target/image/storage-operator.tar      # containerd
#   docker load -i target/image/storage-operator.tar                   # Docker
# With a registry and a container engine, image/Containerfile builds the same image from source.
set -euo pipefail
cd "$(dirname "$0")/.."

binary=target/release/storage-operator
out=target/image/storage-operator.tar
tags=()
while [ $# -gt 0 ]; do
  case $1 in
    --binary) binary=$2; shift 2 ;;
    --tag) tags+=("$2"); shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "error: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ ! -x "$binary" ]; then
  echo "error: $binary not found: build it with 'cargo build --release -p cli' or pass --binary" >&2
  exit 1
fi
version=$("$binary" --version | awk '{print $2}')
if [ ${#tags[@]} -eq 0 ]; then
  tags=("localhost/storage-operator:latest" "localhost/storage-operator:$version")
fi
case $(uname -m) in
  x86_64) arch=amd64 ;;
  aarch64) arch=arm64 ;;
  *) arch=$(uname -m) ;;
esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/rootfs
mkdir -p "$root/usr/local/bin" "$root/etc" "$root/tmp"
chmod 1777 "$root/tmp"
install -m 0755 "$binary" "$root/usr/local/bin/storage-operator"

# The libraries the binary loads, at the paths the dynamic loader looks for them.
if ldd "$binary" >/dev/null 2>&1; then
  ldd "$binary" | awk '/=> \//{print $3} /^[[:space:]]*\//{print $1}' | sort -u | while read -r lib; do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done
fi
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$root/etc/group"

# One reproducible layer: sorted names, fixed times and owners.
blobs=$work/oci/blobs/sha256
mkdir -p "$blobs"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=gnu \
  -C "$root" -cf "$work/layer.tar" .
layer=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
layer_size=$(stat -c %s "$work/layer.tar")
mv "$work/layer.tar" "$blobs/$layer"

cat >"$work/config.json" <<EOF
{"architecture":"$arch","os":"linux","created":"1970-01-01T00:00:00Z","config":{"User":"65532:65532","Entrypoint":["/usr/local/bin/storage-operator"],"Env":["PATH=/usr/local/bin:/usr/bin:/bin"],"WorkingDir":"/","Labels":{"org.opencontainers.image.title":"storage-operator","org.opencontainers.image.version":"$version"}},"rootfs":{"type":"layers","diff_ids":["sha256:$layer"]},"history":[{"created":"1970-01-01T00:00:00Z","created_by":"image/build.sh"}]}
EOF
config=$(sha256sum "$work/config.json" | cut -d' ' -f1)
config_size=$(stat -c %s "$work/config.json")
mv "$work/config.json" "$blobs/$config"

cat >"$work/manifest.json" <<EOF
{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:$config","size":$config_size},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:$layer","size":$layer_size}]}
EOF
manifest=$(sha256sum "$work/manifest.json" | cut -d' ' -f1)
manifest_size=$(stat -c %s "$work/manifest.json")
mv "$work/manifest.json" "$blobs/$manifest"

entries=()
repo_tags=()
for tag in "${tags[@]}"; do
  entries+=("{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"sha256:$manifest\",\"size\":$manifest_size,\"annotations\":{\"io.containerd.image.name\":\"$tag\",\"org.opencontainers.image.ref.name\":\"${tag##*:}\"}}")
  repo_tags+=("\"$tag\"")
done
join() { local IFS=,; echo "$*"; }
echo "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\",\"manifests\":[$(join "${entries[@]}")]}" >"$work/oci/index.json"
echo '{"imageLayoutVersion":"1.0.0"}' >"$work/oci/oci-layout"
echo "[{\"Config\":\"blobs/sha256/$config\",\"RepoTags\":[$(join "${repo_tags[@]}")],\"Layers\":[\"blobs/sha256/$layer\"]}]" >"$work/oci/manifest.json"

mkdir -p "$(dirname "$out")"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=gnu \
  -C "$work/oci" -cf "$out" .
echo "wrote $out ($(du -h "$out" | cut -f1)): ${tags[*]}" >&2
