#!/bin/sh
# Installs CRIU (checkpoint/restore in userspace) as /usr/local/sbin/criu, for the
# process driver's fast wake of sleeping agents (docs/runtime.md "Sleep and wake").
#
# Why build it: Debian 12 ships CRIU 3.17, which fails on current kernels; 4.2 reads
# the socket options of newer kernels correctly. The source is Debian's own
# (deb.debian.org, the sid package's upstream tarball, checked by its SHA-256), built
# in about 30 s on two cores. It is built without nftables: network locking is not
# used (the agent's connections are restored closed), and its probe fails when CRIU
# runs with an agent's real uid, as the service runs it.
#
# Usage (as root): scripts/install-criu.sh   Idempotent; PREFIX=/usr/local by default.
set -eu

VERSION=4.2.1
SHA256=29ec0ee09e296479fe7048c80980e8ef1d0684d0b0204c2b101dfea19f6725b9
URL="http://deb.debian.org/debian/pool/main/c/criu/criu_${VERSION}.orig.tar.xz"
PREFIX=${PREFIX:-/usr/local}

if "$PREFIX/sbin/criu" --version 2>/dev/null | grep -q "Version: $VERSION"; then
  echo "criu $VERSION is installed at $PREFIX/sbin/criu"
  exit 0
fi

BUILD_DEPS="build-essential pkg-config curl xz-utils libbsd-dev libcap-dev libgnutls28-dev \
  libnet1-dev libnl-3-dev libprotobuf-c-dev libprotobuf-dev protobuf-c-compiler \
  protobuf-compiler uuid-dev python3-protobuf libaio-dev"
missing=""
for pkg in $BUILD_DEPS; do dpkg -s "$pkg" >/dev/null 2>&1 || missing="$missing $pkg"; done
if [ -n "$missing" ]; then
  echo "apt-get install$missing"
  apt-get update -qq
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
curl -fsSL -o "$work/criu.tar.xz" "$URL"
echo "$SHA256  $work/criu.tar.xz" | sha256sum -c - >/dev/null
tar -xJf "$work/criu.tar.xz" -C "$work"

# pkg-config that never finds libnftables (see above), whatever this machine has.
cat >"$work/pkg-config" <<'EOF'
#!/bin/sh
for arg in "$@"; do [ "$arg" = libnftables ] && exit 1; done
exec pkg-config "$@"
EOF
chmod +x "$work/pkg-config"

make -C "$work/criu-$VERSION" -j"$(nproc)" PKG_CONFIG="$work/pkg-config" criu >"$work/build.log" 2>&1 ||
  { tail -30 "$work/build.log" >&2; exit 1; }
install -D -m 0755 "$work/criu-$VERSION/criu/criu" "$PREFIX/sbin/criu"
"$PREFIX/sbin/criu" --version | head -n1
