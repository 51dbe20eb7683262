#!/usr/bin/env bash
# deploy/containers/agent-bundle.sh AGENT OUTDIR: a self-contained copy of
# tfslurm-agent in OUTDIR that runs inside any container image, whatever its
# C library:
#   OUTDIR/tfslurm-agent   the agent
#   OUTDIR/lib/            every shared library it loads (ldd), the host's glibc among them
#   OUTDIR/loader          the host's dynamic loader (ld-linux-*.so.*)
# run as `OUTDIR/loader --library-path OUTDIR/lib OUTDIR/tfslurm-agent ARGS`
# (service/core/container_launch.h). The loader named on the command line
# runs the agent on the host's glibc and libraries, never the image's
# (Ubuntu 22.04 has glibc 2.35, which a Debian 12 build needs 2.36 of; musl
# images have none), and through no environment variable: the program the
# agent starts runs on the image's own libraries. pyxis and Slurm's OCI
# support mount OUTDIR read-only at the same path in every container.
#
# The build makes it beside the agent (build/bin/agent-bundle, CMake target
# tfslurm-agent-bundle), and `cmake --install` puts it in
# LIBEXECDIR/tfslurm. The tfslurm-agent package makes it on every node from
# the node's own libraries (its postinst runs this script, installed as
# /usr/libexec/tfslurm/tfslurm-agent-bundle, into
# /var/lib/tfslurm-agent/agent-bundle), and again whenever a library
# package changes (the ldconfig trigger), so a security update of a library
# reaches the bundle too. tfslurmd --container-agent-dir names it. Replaced
# whole, never in place: a running agent keeps the files it has open.
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: $0 AGENT OUTDIR" >&2; exit 2; }
agent="$1" out="$2"
[[ -x "$agent" ]] || { echo "agent-bundle: $agent is not an executable" >&2; exit 1; }
tmp="$out.new.$$"
rm -rf "$tmp"
mkdir -p "$tmp/lib"
trap 'rm -rf "$tmp"' EXIT
loader=""
# ldd prints "libx.so => /path (addr)" for libraries and "/lib64/ld-linux-x86-64.so.2 (addr)"
# for the loader.
while read -r first second third _; do
  if [[ $second == "=>" && $third == /* ]]; then
    cp -L "$third" "$tmp/lib/"
  elif [[ $first == /* && $first == *ld-linux* ]]; then
    loader="$first"
  fi
done < <(ldd "$agent")
[[ -n "$loader" ]] || { echo "agent-bundle: ldd names no dynamic loader for $agent" >&2; exit 1; }
cp -L "$loader" "$tmp/loader"
cp -L "$agent" "$tmp/tfslurm-agent"
chmod -R a+rX "$tmp"
"$tmp/loader" --library-path "$tmp/lib" "$tmp/tfslurm-agent" --help >/dev/null ||
  { echo "agent-bundle: the bundled agent does not run" >&2; exit 1; }
rm -rf "$out.old"
if [[ -e "$out" ]]; then mv "$out" "$out.old"; fi
mv "$tmp" "$out"
rm -rf "$out.old"
