#!/usr/bin/env bash
# run-peers.sh -- baseline numbers for established collective libraries on this box.
#
#   bash bench/peers/run-peers.sh [section ...]
#     sections: phys  mpi-allreduce  mpi-other  gloo  mpich
#               (default: all; mpich only if Debian's mpich package is installed)
#   env: REPS=3                     repetitions of every measurement (median reported)
#        OUT=/tmp/peer-bench/<ts>   where raw results go (only /tmp is written)
#        SIZES="4 64 ..."           message sizes in bytes (default: 4 B .. 256 MiB)
#        QUIET_WAIT=10 QUIET_IDLE=90  before each run wait up to 10 s for >= 90 % idle CPU
#                                   (the box is shared); what was seen goes to quiet.log
#        RUN_TIMEOUT=240            deadline per benchmark run (a hang is logged, not fatal)
#
# Items:  phys          membw.c (memcpy, float32 a+=b, c=a+b, first-touch page faults;
#                       1 MiB and 256 MiB buffers) + iperf3 (1 stream, 3 s)
#         mpi-allreduce OpenMPI MPI_Allreduce, {shm, tcp} x {2, 4 ranks}
#         mpi-other     OpenMPI MPI_Allgather + MPI_Bcast, {shm, tcp} x 2 ranks
#         gloo          PyTorch (Debian python3-torch 1.13) Gloo all_reduce, 2 and 4 procs
#         mpich         MPICH 4.0.2 (Debian, ch4:ucx) MPI_Allreduce, {shm, tcp} x {2, 4 ranks}
#                       (mpiexec.mpich / mpicc.mpich; OpenMPI stays the default mpirun)
# Repetitions are interleaved (rep 1 of everything, then rep 2, ...) so slow phases
# of the shared machine hit all configurations alike.  Typical total: ~5 min
# (~7 min with the mpich section).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-/tmp/peer-bench-build}
OUT=${OUT:-/tmp/peer-bench/$(date +%Y%m%d-%H%M%S)}
REPS=${REPS:-3}
SIZES=${SIZES:-"4 64 1024 16384 262144 1048576 4194304 16777216 67108864 268435456"}
DEFAULT_SECTIONS="phys mpi-allreduce mpi-other gloo"
command -v mpiexec.mpich > /dev/null && DEFAULT_SECTIONS="$DEFAULT_SECTIONS mpich"
SECTIONS=${*:-$DEFAULT_SECTIONS}
PY=/usr/bin/python3           # Debian python: sees python3-torch (pyenv python does not)
MPIRUN="mpirun --allow-run-as-root --oversubscribe"
SHM=""                                              # default: pml ob1 + btl vader (CMA)
TCP="--mca btl tcp,self --mca btl_tcp_if_include lo"  # TCP only, loopback
# MPICH (ch4:ucx): default UCX transports = sysv/posix shm + cma; TCP only via UCX env
MPICH_TCP="env UCX_TLS=tcp,self UCX_NET_DEVICES=lo"
mkdir -p "$BUILD" "$OUT"
RUN_TIMEOUT=${RUN_TIMEOUT:-240}  # deadline (s) for one benchmark process group
QUIET_WAIT=${QUIET_WAIT:-10}  # max seconds to wait for an idle box before each run
QUIET_IDLE=${QUIET_IDLE:-90}  # "idle" = at least this % CPU idle over 0.5 s
has() { [[ " $SECTIONS " == *" $1 "* ]]; }
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
idle_pct() { # % of CPU time idle (+iowait) over $1 seconds, all CPUs
  local a b c d e f g h t1 i1
  read -r _ a b c d e f g h _ < /proc/stat; t1=$((a+b+c+d+e+f+g+h)); i1=$((d+e))
  sleep "$1"
  read -r _ a b c d e f g h _ < /proc/stat
  echo $(( 100 * (d + e - i1) / ((a+b+c+d+e+f+g+h - t1) > 0 ? (a+b+c+d+e+f+g+h - t1) : 1) ))
}
wait_quiet() { # the box is shared: wait up to QUIET_WAIT s for it to be idle; log what we saw
  local waited=0 idle
  while :; do
    idle=$(idle_pct 0.5)
    if (( idle >= QUIET_IDLE || waited >= QUIET_WAIT * 2 )); then break; fi  # waited: half-seconds
    waited=$((waited + 1))
  done
  echo -e "$1\tidle_before=${idle}%\twaited_s=$(( waited / 2 ))" >> "$OUT/quiet.log"
}

# ---- build
mpicc -O2 -o "$BUILD/mpi_coll_bench" "$HERE/mpi_coll_bench.c"
gcc -O3 -march=native -o "$BUILD/membw" "$HERE/membw.c"
if has mpich; then mpicc.mpich -O2 -o "$BUILD/mpi_coll_bench_mpich" "$HERE/mpi_coll_bench.c"; fi

# ---- environment record
{
  echo "date: $(date -Is)"; echo "host: $(uname -srm)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $(nproc) cores"
  echo "mem: $(free -g | awk '/Mem:/{print $2}') GiB"
  echo "mpi: $(mpirun --version 2>&1 | head -1)"
  has mpich && echo "mpich: $(mpichversion 2>/dev/null | head -1 | xargs), device $(mpichversion 2>/dev/null | sed -n 3p | cut -f2 | xargs)"
  echo "iperf3: $(iperf3 --version | head -1)"
  echo "torch: $($PY -c 'import torch; print(torch.__version__)' 2>/dev/null || echo n/a)"
  echo "loadavg at start: $(cat /proc/loadavg)"
} > "$OUT/env.txt"
cat "$OUT/env.txt" >&2

coll() { # name cmd...   (every run has a deadline: one MPICH/UCX-TCP launch once hung)
  local name=$1 rc=0; shift
  wait_quiet "coll.$name.rep$rep"
  log "$name rep$rep"
  timeout -k 5 "$RUN_TIMEOUT" "$@" > "$OUT/coll.$name.rep$rep.tsv" 2> "$OUT/coll.$name.rep$rep.err" || rc=$?
  if (( rc != 0 )); then
    log "  FAILED rc=$rc$( (( rc == 124 )) && echo " (timeout ${RUN_TIMEOUT}s)") (see $OUT/coll.$name.rep$rep.err)"
  fi
}

IPERF_PORT=5299
for rep in $(seq 1 "$REPS"); do
  if has phys; then
    for b in 1048576 268435456; do
      wait_quiet "membw.$b.rep$rep"
      log "membw $b rep$rep"
      "$BUILD/membw" "$b" 10 > "$OUT/membw.$b.rep$rep.tsv" 2>/dev/null
    done
    wait_quiet "iperf3.rep$rep"
    log "iperf3 rep$rep"
    iperf3 -s -1 -p $IPERF_PORT > /dev/null 2>&1 &
    spid=$!
    sleep 0.5
    iperf3 -c 127.0.0.1 -p $IPERF_PORT -t 3 -J > "$OUT/iperf3.rep$rep.json" || true
    wait $spid || true
  fi
  if has mpi-allreduce; then
    for np in 2 4; do
      coll mpi-allreduce-shm-np$np $MPIRUN -np $np $SHM "$BUILD/mpi_coll_bench" allreduce $SIZES
      coll mpi-allreduce-tcp-np$np $MPIRUN -np $np $TCP "$BUILD/mpi_coll_bench" allreduce $SIZES
    done
  fi
  if has mpi-other; then
    for op in allgather bcast; do
      coll mpi-$op-shm-np2 $MPIRUN -np 2 $SHM "$BUILD/mpi_coll_bench" $op $SIZES
      coll mpi-$op-tcp-np2 $MPIRUN -np 2 $TCP "$BUILD/mpi_coll_bench" $op $SIZES
    done
  fi
  if has mpich; then
    for np in 2 4; do
      coll mpich-allreduce-shm-np$np mpiexec.mpich -n $np "$BUILD/mpi_coll_bench_mpich" allreduce $SIZES
      coll mpich-allreduce-tcp-np$np $MPICH_TCP mpiexec.mpich -n $np "$BUILD/mpi_coll_bench_mpich" allreduce $SIZES
    done
  fi
  if has gloo; then
    for np in 2 4; do
      coll gloo-allreduce-tcp-np$np env GLOO_SOCKET_IFNAME=lo OMP_NUM_THREADS=1 \
        $PY "$HERE/gloo_bench.py" $np $SIZES
    done
  fi
done

log "raw results in $OUT"
echo "loadavg at end: $(cat /proc/loadavg)" >> "$OUT/env.txt"
echo "## Results ($OUT)"
echo
sed 's/^/    /' "$OUT/env.txt"
$PY "$HERE/aggregate.py" "$OUT"
