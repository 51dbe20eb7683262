#!/usr/bin/env bash
# bench/containers.sh [--runs N] [--slurm VERSION]: the per-task start
# overhead of a container against no container, side by side in one run, on
# the local cluster (issue 44), per runtime:
#   none         srun python3 -c <print a line>           (the host's python3)
#   pyxis cold   srun --container-image=python.sqsh --container-name=NEW ...
#                (pyxis imports: unsquashfs into the node's enroot data)
#   pyxis warm   the same name again (pyxis reuses the node's import)
#   enroot cold  tfslurm-container-launch (enroot create, then enroot start)
#   enroot warm  the same image again (enroot start of the node's import)
#   oci          srun --container=tf.oci (Slurm's OCI support, the cluster's
#                oci.conf: rootless runc), the image's stock bundle; nothing is
#                imported (the bundle's rootfs is used in place), so there is
#                no cold and warm
# Each figure is the wall time from srun's start to the program's line on
# stdout, one task on one node, median of N runs (default 3; cold runs
# remove the import first).
# Then through tfslurmd, per runtime (none, pyxis, enroot, and oci=tf.oci
# where slurmctld is 23.02 or later; N runs each, interleaved): a POST of an
# experiment of 6 tasks on 3 nodes -> its first step, and a kill -9 of one
# task's program -> attempt 2's first step, in place (bench/in_place.py
# --runtime). tfslurm refuses runtime oci on Slurm 22.05, Debian's, which the
# default run's cluster is (docs/containers.md): --slurm measures it.
# Target: warm at most 1 s more than none per task; the cold import is
# paid once per node (every task of a node waits for the one import:
# tests/integration/test_containers.py).
#
# --slurm VERSION (26.05.3): all of the above on a cluster of its own of that
# Slurm release, as tests/compat.sh runs it: the release built by
# deploy/local-slurm/build-slurm.sh (cached), pyxis built against it
# (tests/containers.sh --slurm-prefix), its srun on PATH, and tfslurmd from
# build-slurm-VERSION/ (tests/compat.sh --build-only VERSION, built first: a
# tfslurmd linked against that release's libslurm, the main build's agent
# and launcher beside it; TFSLURM_BENCH_BUILD names another, taken as it is).
#
# Without --slurm: runs on the cluster SLURM_CONF names, started with
# --containers (a hosts-apart one too), with LOCAL_SLURM_CONTAINERS (enroot
# for the launcher) and TFSLURM_IMAGES as tests/containers.sh prints them;
# without SLURM_CONF it makes those (tests/containers.sh, cached) and starts a
# cluster of its own, as bench/run.sh --smoke runs it. And the build
# (TFSLURM_BENCH_BUILD, default build/). Appends its figures with the load to
# bench/RESULTS.md unless TFSLURM_BENCH_RESULTS names another file. Exits
# non-zero on any failed run.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"
here="$BENCH_DIR"
repo="$REPO"
runs=3
slurm_version=""
while (($#)); do
  case "$1" in
    --runs) runs="${2:?--runs N}" && shift 2 ;;
    --slurm) slurm_version="${2:?--slurm VERSION}" && shift 2 ;;
    *) die "usage: $0 [--runs N] [--slurm VERSION (a release deploy/local-slurm/build-slurm.sh builds)]" ;;
  esac
done
command_line="bench/containers.sh --runs $runs${slurm_version:+ --slurm $slurm_version}"
section=""
work=""
trap 'stop_tfslurmd; cancel_all_jobs; stop_cluster; rm -rf "$section" "$work"' EXIT
if [[ -n "$slurm_version" ]]; then
  # A cluster of that release of the bench's own, as tests/compat.sh starts
  # its own: not one that SLURM_CONF names (whose release may be another).
  [[ -z "${SLURM_CONF:-}" ]] || die "--slurm starts a cluster of its own: unset SLURM_CONF"
  prefix="$("$repo/deploy/local-slurm/build-slurm.sh" "$slurm_version")" || die "build-slurm.sh $slurm_version failed"
  if [[ -z "${TFSLURM_BENCH_BUILD:-}" ]]; then
    TFSLURM_BENCH_BUILD="$repo/build-slurm-$slurm_version"
    blog="${TMPDIR:-/tmp}/bench-containers-build.log"
    log "building tfslurmd against Slurm $slurm_version (tests/compat.sh --build-only; log: $blog)"
    "$repo/tests/compat.sh" --build-only "$slurm_version" >"$blog" 2>&1 ||
      { tail -30 "$blog" >&2; die "tests/compat.sh --build-only $slurm_version failed"; }
  fi
  # pyxis built against this release, and its oci.conf (runc).
  containers_env="$("$repo/tests/containers.sh" --slurm-prefix "$prefix")" || die "tests/containers.sh failed"
  eval "$containers_env"
  # Its srun, sbatch and scancel: the system's (22.05) speak another protocol.
  export PATH="$prefix/bin:$prefix/sbin:$PATH" LOCAL_SLURM_PREFIX="$prefix"
  start_cluster # start.sh --slurm-prefix, --containers: from the environment
elif [[ -z "${SLURM_CONF:-}" ]]; then
  if [[ -z "${LOCAL_SLURM_CONTAINERS:-}" || -z "${TFSLURM_IMAGES:-}" ]]; then
    containers_env="$("$repo/tests/containers.sh")" || die "tests/containers.sh failed"
    eval "$containers_env"
  fi
  start_cluster # start.sh --containers "$LOCAL_SLURM_CONTAINERS", from the environment
fi
images="${TFSLURM_IMAGES:?set TFSLURM_IMAGES (tests/containers.sh prints it)}"
build="${TFSLURM_BENCH_BUILD:-$repo/build}"
launch="$build/bin/tfslurm-container-launch"
image="$images/python.sqsh"
program=(python3 -c 'print("tfslurm-bench: started", flush=True)')

cluster_dir="$(dirname -- "$(dirname -- "$SLURM_CONF")")"
# On a hosts-apart cluster (start.sh --hosts-apart) srun runs on its login
# host, whose network reaches slurmctld; the way in costs every kind alike.
srun=(srun) scontrol=(scontrol)
if "$repo/deploy/local-slurm/on-host.sh" "$cluster_dir" login true 2>/dev/null; then
  srun=("$repo/deploy/local-slurm/on-host.sh" "$cluster_dir" login srun)
  scontrol=("$repo/deploy/local-slurm/on-host.sh" "$cluster_dir" login scontrol)
fi
# slurmctld's release (scontrol show config: the controller's, not the
# client's): tfslurm runs runtime oci on 23.02 and later only.
release="$("${scontrol[@]}" show config 2>/dev/null | awk '$1 == "SLURM_VERSION" {print $3}')"
oci_by_tfslurmd=0
if awk -v r="$release" 'BEGIN { split(r, v, "."); exit !(v[1] > 23 || (v[1] == 23 && v[2] >= 2)) }'; then
  oci_by_tfslurmd=1
fi
BENCH_LOAD_AT_START="$(cut -d' ' -f1-3 /proc/loadavg)"
# The launcher runs enroot from the task's PATH, srun's: where start.sh
# --containers put it for the daemons (a site installs it in /usr/bin).
if [[ -n "${LOCAL_SLURM_CONTAINERS:-}" ]]; then export PATH="$LOCAL_SLURM_CONTAINERS/bin:$PATH"; fi

# Seconds from now until srun's task prints its line; a failed srun or a
# missing line is an error of the run (bench_error), and no figure.
time_srun() {
  local started out
  started=$(date +%s.%N)
  out="$("${srun[@]}" -N1 -n1 -w node1 "$@" 2>&1)" || { echo "srun $* failed: ${out: -300}" | tr '\n' ' '; return 1; }
  [[ $out == *"tfslurm-bench: started"* ]] || { echo "no line from srun $*: ${out: -300}"; return 1; }
  awk -v a="$(date +%s.%N)" -v b="$started" 'BEGIN { printf "%.3f\n", a - b }' 
}
# One run's figure into samples, or its failure into the errors.
sample() {
  local out
  if out="$(time_srun "$@")"; then samples+=("$out"); else bench_error "$kind: $out"; fi
}
# The run before the warm ones (its import), not counted.
warm_up() {
  local out
  out="$(time_srun "$@")" || bench_error "$kind, the warm-up: $out"
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# node1's enroot imports: its own disk at /var/tmp/tfslurm-node (start.sh --containers).
enroot_data="$cluster_dir/node-local/node1/enroot-data-$(id -u)"

declare -A figures
for kind in none pyxis-cold pyxis-warm enroot-cold enroot-warm oci; do
  samples=()
  for ((i = 0; i < runs; i++)); do
    case "$kind" in
      none) sample "${program[@]}" ;;
      pyxis-cold)
        name="bench-$$-$i"
        sample --container-image="$image" --container-name="$name:no_exec" \
          --no-container-mount-home "${program[@]}"
        rm -rf "$enroot_data/pyxis_$name" ;;
      pyxis-warm)
        name="bench-$$-warm"
        if ((i == 0)); then warm_up --container-image="$image" --container-name="$name:no_exec" \
          --no-container-mount-home "${program[@]}"; fi
        sample --container-image="$image" --container-name="$name:no_exec" \
          --no-container-mount-home "${program[@]}" ;;
      enroot-cold | enroot-warm)
        if [[ $kind == enroot-cold ]]; then rm -rf "$enroot_data"/tfslurm-*; fi
        if [[ $kind == enroot-warm && $i == 0 ]]; then
          warm_up "$launch" --runtime enroot --image "$image" --workdir /tmp -- "${program[@]}"
        fi
        sample "$launch" --runtime enroot --image "$image" --workdir /tmp -- "${program[@]}" ;;
      oci) sample --container="$images/tf.oci" "${program[@]}" ;;
    esac
  done
  figures[$kind]="$( ((${#samples[@]})) && printf '%s\n' "${samples[@]}" | median || echo 0)"
  printf 'bench/containers: %-12s median %6.2f s of %d (%s)\n' "$kind" "${figures[$kind]}" "$runs" "${samples[*]}"
done
rm -rf "$enroot_data/pyxis_bench-$$-warm"

minus() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f\n", a - b }'; }
over_pyxis="$(minus "${figures[pyxis-warm]}" "${figures[none]}")"
over_enroot="$(minus "${figures[enroot-warm]}" "${figures[none]}")"
over_oci="$(minus "${figures[oci]}" "${figures[none]}")"
section="$(mktemp /tmp/bench-containers-XXXX.md)"
{
  echo "Slurm ${release:-?} (slurmctld). Per task, one task on node1, median of $runs runs; image python.sqsh ($(du -h "$image" | cut -f1));"
  echo "load average at the end $(cut -d' ' -f1-3 /proc/loadavg)."
  echo
  echo "| per task, srun -> first line | none | pyxis cold | pyxis warm | enroot cold | enroot warm | oci (tf.oci) |"
  echo "|---|---|---|---|---|---|---|"
  printf '| median s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n' "${figures[none]}" "${figures[pyxis-cold]}" \
    "${figures[pyxis-warm]}" "${figures[enroot-cold]}" "${figures[enroot-warm]}" "${figures[oci]}"
  printf '\nwarm over none: pyxis %+.2f s, enroot %+.2f s, oci %+.2f s (target: at most +1 s)\n' \
    "$over_pyxis" "$over_enroot" "$over_oci"
} >"$section"

# Through tfslurmd: its listeners are on 127.0.0.1, which the nodes of a
# hosts-apart cluster do not reach; the bench's own cluster is on loopback.
status=0
if [[ -n "${CLUSTER_DIR:-}" && ! -s "$CLUSTER_DIR/etc/network" ]]; then
  BUILD="$build"
  work="$(mktemp -d /tmp/bench-containers-XXXX)"
  chmod 755 "$work"
  start_tfslurmd "$work/svc" # with PATH's enroot, for the launcher (above)
  rm -rf "$enroot_data"/tfslurm-* # the first run imports on every node
  runtimes=(--runtime none --runtime "pyxis=$image" --runtime "enroot=$image")
  ((oci_by_tfslurmd)) && runtimes+=(--runtime "oci=$images/tf.oci")
  PYTHONPATH="$BENCH_DIR" python3 "$BENCH_DIR/in_place.py" --api "$API" --work "$work" --runtime-runs "$runs" \
    "${runtimes[@]}" >"$work/table.md" || status=$?
  {
    echo
    echo "Through tfslurmd (bench/in_place.py --runtime):"
    echo
    cat "$work/table.md"
    echo
    echo "pyxis and enroot import python.sqsh on each node in the first run (cold); later runs reuse the"
    echo "nodes' imports (warm), as a restart in place does. Load average at the end $(cut -d' ' -f1-3 /proc/loadavg)."
    if ((oci_by_tfslurmd)); then
      echo "oci imports nothing: runc runs tf.oci's rootfs in place, in a bundle tfslurm writes per attempt."
    else
      echo "No oci through tfslurmd: it refuses runtime oci on Slurm ${release:-?} (23.02 and later only; --slurm 26.05.3)."
    fi
  } >>"$section"
else
  echo "bench/containers: the runs through tfslurmd need the bench's own cluster (on loopback): skipped" >>"$section"
fi
title="Containers: per-task start overhead, none/pyxis/enroot (issue 44)"
((oci_by_tfslurmd)) && title="Containers: per-task start overhead, none/pyxis/enroot/oci, Slurm $release (issue 44)"
((status == 0)) || title="$title -- FAILED RUNS"
cat "$section"
results_append "$title" "$command_line" "$section"
((status == 0)) || die "some runs through tfslurmd went wrong (see the problems column)"
