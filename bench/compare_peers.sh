#!/usr/bin/env bash
# compare_peers.sh -- ringreduce next to OpenMPI and Gloo, in one run, repetitions interleaved
# (rep 1 of everything, then rep 2, ...) so the shared machine's slow phases hit all alike.
#
#   npm run build && bash bench/compare_peers.sh            # REPS=2, 2 and 4 ranks, ~15 min
#   REPS=1 RANKS="2" SIZES="4 1024 16384" bash bench/compare_peers.sh
#
# Needs the peers installed (see bench/peers/README.md). Prints one markdown table of mean
# time per call (best of the repetitions), the 2-rank floors of a small call
# (bench/thread_hop_floor.ts) and ringreduce's ratio to the best peer and to Gloo, for the API's
# default (input copied), in place (`out` = the tensor, as torch.distributed) and with the engine
# on the caller's thread (RINGREDUCE_ENGINE_THREAD=0); raw results
# stay in $OUT. Figures only compare within one run: the absolute numbers move with the load.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
PEERS=${PEERS:-$HERE/peers}
REPS=${REPS:-2}
RANKS=${RANKS:-"2 4"}
SIZES=${SIZES:-"4 1024 16384 1048576 16777216 268435456"}
OUT=${OUT:-/tmp/ringreduce-compare/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
RR_SIZES=$(echo $SIZES | tr ' ' ',')
for rep in $(seq 1 "$REPS"); do
  OUT="$OUT/peers.rep$rep" REPS=1 SIZES="$SIZES" bash "$PEERS/run-peers.sh" mpi-allreduce gloo > "$OUT/peers.rep$rep.md" 2> "$OUT/peers.rep$rep.log" || true
  # The floors of a small call on 2 ranks (bench/thread_hop_floor.ts): the thread hand-offs of
  # ringreduce's design, and those of a design whose caller thread owns the socket.
  node "$ROOT/dist/bench/thread_hop_floor.js" 10000 --json "$OUT/floor-engine-thread.rep$rep.json" >&2 || echo "floor failed" >&2
  node "$ROOT/dist/bench/thread_hop_floor.js" 10000 --caller-only --json "$OUT/floor-caller-only.rep$rep.json" >&2 || echo "floor failed" >&2
  for np in $RANKS; do
    echo "[$(date +%H:%M:%S)] ringreduce np$np rep$rep" >&2
    node "$ROOT/dist/bench/main.js" --op allreduce --sizes "$RR_SIZES" --ranks "$np" \
      --json "$OUT/ringreduce-np$np.rep$rep.json" > "$OUT/ringreduce-np$np.rep$rep.txt" 2>&1 || echo "ringreduce np$np failed" >&2
    # In place, as torch.distributed's all_reduce works (and MPI's benchmark reads its input
    # without copying it): the same collective without the API's input copy.
    node "$ROOT/dist/bench/main.js" --op allreduce --sizes "$RR_SIZES" --ranks "$np" --in-place \
      --json "$OUT/ringreduce-inplace-np$np.rep$rep.json" > "$OUT/ringreduce-inplace-np$np.rep$rep.txt" 2>&1 || echo "ringreduce in place np$np failed" >&2
    # The engine on the caller's thread (RINGREDUCE_ENGINE_THREAD=0): one thread wake-up per call.
    RINGREDUCE_ENGINE_THREAD=0 node "$ROOT/dist/bench/main.js" --op allreduce --sizes "$RR_SIZES" --ranks "$np" \
      --json "$OUT/ringreduce-callerthread-np$np.rep$rep.json" > "$OUT/ringreduce-callerthread-np$np.rep$rep.txt" 2>&1 || echo "ringreduce on the caller's thread np$np failed" >&2
  done
done
node "$ROOT/dist/bench/compare_table.js" "$OUT"
