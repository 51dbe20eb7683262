# Sourced by tests/run.sh and tests/compat.sh: compile through ccache, so
# that a second build of the same sources with the same flags (tfslurmd
# against another Slurm release, in its own build directory) takes the first
# one's objects instead of compiling them again. Paths are made relative to
# the checkout (CCACHE_BASEDIR) and the build directory is not hashed
# (CCACHE_NOHASHDIR: it only names the object files and the debug info's
# directory), so two build directories of one checkout share every object
# whose sources and flags agree. The cache is ccache's own, outside the
# checkout (~/.cache/ccache). Without ccache (it is in deploy/install-deps.sh)
# nothing changes but the time.
# shellcheck shell=bash
#
# The locale is not hashed (sloppiness locale): debhelper runs the package
# build (tests/packages.sh) with LC_ALL=C.UTF-8, and ccache would otherwise
# hash LANG and LC_ALL into every key, so that no object of this build could
# serve the packages. The locale only changes the language of diagnostics.
ccache_launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="${repo:?}" CCACHE_NOHASHDIR=true CCACHE_SLOPPINESS=locale
  ccache_launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
