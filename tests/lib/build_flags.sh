# Sourced by tests/run.sh (its main build), tests/compat.sh and
# tests/packages.sh: the compiler flags of the Debian packages (debian/rules'
# DEB_BUILD_MAINT_OPTIONS through dpkg-buildflags: -O2 -g, stack protector,
# _FORTIFY_SOURCE=2, format checks; relro and bindnow at link), as CMake
# options in the array package_flags, with CPPFLAGS appended to CFLAGS and
# CXXFLAGS as debhelper's cmake build system does:
#   cmake -S . -B build ... "${package_flags[@]}"
#
# Why: the package build (tests/packages.sh) then compiles with exactly the
# flags of CI's main build, so every object comes from ccache instead of a
# second full compile, and CI's tests run the very objects the packages
# ship. Given as cache entries (-D), not as CFLAGS in the environment:
# CMake reads the environment only when a build directory is first
# configured, and later stages (sanitizers, clang, Python wheels) must not
# inherit these flags.
# shellcheck shell=bash
package_flags=()
tfslurm_package_flags() {
  local rules="${repo:?}/debian/rules" options cppflags cflags cxxflags ldflags
  options="$(sed -n 's/^export DEB_BUILD_MAINT_OPTIONS *= *//p' "$rules")"
  [[ -n $options ]] || {
    echo "build_flags.sh: no DEB_BUILD_MAINT_OPTIONS in $rules" >&2
    return 1
  }
  cppflags="$(DEB_BUILD_MAINT_OPTIONS="$options" dpkg-buildflags --get CPPFLAGS)" &&
    cflags="$(DEB_BUILD_MAINT_OPTIONS="$options" dpkg-buildflags --get CFLAGS)" &&
    cxxflags="$(DEB_BUILD_MAINT_OPTIONS="$options" dpkg-buildflags --get CXXFLAGS)" &&
    ldflags="$(DEB_BUILD_MAINT_OPTIONS="$options" dpkg-buildflags --get LDFLAGS)" || return 1
  package_flags=(
    "-DCMAKE_C_FLAGS=$cflags $cppflags"
    "-DCMAKE_CXX_FLAGS=$cxxflags $cppflags"
    "-DCMAKE_EXE_LINKER_FLAGS=$ldflags"
    "-DCMAKE_SHARED_LINKER_FLAGS=$ldflags"
    "-DCMAKE_MODULE_LINKER_FLAGS=$ldflags"
  )
}
tfslurm_package_flags
