# Sourced by tests/run.sh (its main build), tests/compat.sh and
# tests/packages.sh: the compiler flags of the Debian packages (debian/rules'
# DEB_BUILD_MAINT_OPTIONS through dpkg-buildflags: -O2 -g, stack protector,
# _FORTIFY_SOURCE=2, format checks; relro and bindnow at link), exported as
# CFLAGS, CXXFLAGS and LDFLAGS for CMake to take at configure time, with
# CPPFLAGS appended to the first two as debhelper does for CMake.
#
# Why: the package build (tests/packages.sh) then compiles with exactly the
# flags of CI's main build, so every object comes from ccache instead of a
# second full compile, and CI's tests run the very objects the packages
# ship. CMake reads these variables only when a build directory is first
# configured: an existing build/ keeps the flags it was made with
# (`rm -r build` to change them).
# shellcheck shell=bash
tfslurm_build_flags() {
  local rules="${repo:?}/debian/rules" options
  options="$(sed -n 's/^export DEB_BUILD_MAINT_OPTIONS *= *//p' "$rules")"
  [[ -n $options ]] || {
    echo "build_flags.sh: no DEB_BUILD_MAINT_OPTIONS in $rules" >&2
    return 1
  }
  local cppflags
  cppflags="$(DEB_BUILD_MAINT_OPTIONS="$options" dpkg-buildflags --get CPPFLAGS)"
  CFLAGS="$(DEB_BUILD_MAINT_OPTIONS="$options" dpkg-buildflags --get CFLAGS) $cppflags"
  CXXFLAGS="$(DEB_BUILD_MAINT_OPTIONS="$options" dpkg-buildflags --get CXXFLAGS) $cppflags"
  LDFLAGS="$(DEB_BUILD_MAINT_OPTIONS="$options" dpkg-buildflags --get LDFLAGS)"
  export CFLAGS CXXFLAGS LDFLAGS
}
tfslurm_build_flags
