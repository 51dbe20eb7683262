# Sourced by tests/packages.sh: the Debian packages of one commit, built
# from a clean clone of it with dpkg-buildpackage, and cached by commit.
# shellcheck shell=bash

# The cache of built packages, outside the checkout: one directory per
# version, holding its .debs, .buildinfo and .changes.
debs_cache="${TFSLURM_DEBS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tfslurm/debs}"
debs_keep=6

# deb_version COMMIT [SUFFIX]: 0.1.0+git<commits>.<hash>[SUFFIX], the
# project's version (CMakeLists.txt at COMMIT) and a count that grows with
# every commit, so that a later commit's packages upgrade an earlier one's.
deb_version() {
  local commit="$1" suffix="${2:-}" base count
  base="$(git -C "$repo" show "$commit:CMakeLists.txt" |
    sed -n 's/^project(tfslurm VERSION \([0-9.]*\).*/\1/p')"
  count="$(git -C "$repo" rev-list --count "$commit")"
  printf '%s+git%s%s.%s\n' "${base:-0.0.0}" "$count" "$suffix" "$(git -C "$repo" rev-parse --short=12 "$commit")"
}

# build_debs COMMIT VERSION: prints the directory holding the
# packages of COMMIT as VERSION, building them unless cached. The build
# runs in a clean clone at COMMIT (nothing uncommitted gets in), through
# ccache with the same relative paths as CI's main build (CCACHE_BASEDIR
# is the clone, the build directory is `build` there too), so that objects
# CI's main build made are reused. The build's log is in the directory
# (build.log); ccache's counts for it are appended to it. The newest
# $debs_keep builds are kept.
build_debs() {
  local commit="$1" version="$2" out="$debs_cache/$2"
  if [[ -f $out/done ]]; then
    echo "$out"
    return 0
  fi
  local src="$work/src-$version"
  rm -rf "$src" "$out"
  mkdir -p "$out"
  git clone -q --shared --no-checkout "$repo" "$src" && git -C "$src" checkout -q --detach "$commit" || return 1
  # The version, in the clone only.
  sed -i "1s/^tfslurm ([^)]*)/tfslurm ($version)/" "$src/debian/changelog"
  local rc
  (
    cd "$src" || exit 1
    # debhelper (compat 13) points HOME at a scratch directory, and with it
    # ccache's default cache: name the cache the main build used.
    CCACHE_DIR="$(ccache -k cache_dir)"
    # debhelper sets LC_ALL=C.UTF-8: not hashed (tests/lib/ccache.sh says why).
    export CCACHE_DIR CCACHE_BASEDIR="$src" CCACHE_NOHASHDIR=true CCACHE_SLOPPINESS=locale
    export CCACHE_STATSLOG="$out/ccache-stats.log"
    export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
    # gzip -1, not dpkg's xz -6: the -dbgsym packages hold debug sections
    # dh_strip has compressed already (tfslurmd's 39 MB came out of xz at
    # 39 MB), and xz took 97 s of the build's 199 s at load 12 even at
    # level 1. These packages are for the checks here; what is in them is
    # the same.
    export DPKG_DEB_COMPRESSOR_TYPE=gzip DPKG_DEB_COMPRESSOR_LEVEL=1
    DEB_BUILD_OPTIONS="parallel=${jobs:-2} nocheck" dpkg-buildpackage -b -us -uc
  ) 2>&1 | stamp_lines >"$out/build.log"
  rc=${PIPESTATUS[0]}
  {
    echo "=== ccache, this build only"
    CCACHE_STATSLOG="$out/ccache-stats.log" ccache --show-log-stats 2>&1
  } >>"$out/build.log"
  if ((rc != 0)); then
    echo "build of $version failed (rc $rc); the end of its log:" >&2
    tail -n 30 "$out/build.log" >&2
    return 1
  fi
  mv "$work"/*_"$version"_* "$out"/ && rm -rf "$src" && touch "$out/done" || return 1
  # The oldest builds go (by when they were built).
  ls -dt "$debs_cache"/*/ | tail -n +$((debs_keep + 1)) | xargs -r rm -rf
  echo "$out"
}

# Each line with the time it came, to see where a build's time goes.
stamp_lines() {
  local l
  while IFS= read -r l; do printf '%(%T)T %s\n' -1 "$l"; done
}

# ccache_hits DIR: "H of N compilations from ccache" for a build of build_debs.
ccache_hits() {
  local log="$1/build.log" hits misses
  hits="$(sed -n 's/^ *\(Direct\|Preprocessed\) hits* *: *\([0-9]*\).*/\2/p; s/^ *Hits *: *\([0-9]*\).*/\1/p' "$log" | head -n 1)"
  misses="$(sed -n 's/^ *Misses *: *\([0-9]*\).*/\1/p' "$log" | head -n 1)"
  echo "${hits:-?} hits, ${misses:-?} misses"
}
