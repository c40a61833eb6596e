#!/usr/bin/env bash
# The GPU machine's work in named steps, each under its own time limit, logs and artefacts in $OUT.
#
#   . /root/gpu/env.sh && bash lab/scripts/gpu_agenda.sh STEP [STEP ...]
#
# Run the steps as one background job with OUT=/root/results, and poll it with
# lab/scripts/gpu_poll.sh, each poll sent as soon as the last returns (lab/gpu.md): the
# machine goes back 30 s after a call ends, background job or not. A bare machine ran `head
# prepare engine ui serve engine42 graphs bench-exit dspark dspark-breakages` in 24 minutes,
# `head prepare dspark42 bench-dspark kernels42-replayssm` in 18, and `head head-sweep
# prepare depths42 dspark-ui kernels42-dspark replayssm` in 16.5 (then depths42 with
# DEPTHS=1,5,7 in 5 more), and `head head-sweep prepare replayssm-state replayssm dspark
# caches` in 18.5; `prepare` before the engines, so that no later step compiles.
#
# Steps (minutes on a warm machine):
#   flashinfer FlashInfer's import, and the JIT build and one call of the sampling kernels the
#              NEXTN verify samples with (first, once the `flashinfer` extra wheels are in:
#              every NEXTN engine needs them); flashinfer-moe also builds the `baseline`
#              profile's SM90 CUTLASS MoE (minutes unknown)
#   head       the LM head alone at M = 1..8: BF16, FP32 logits and every FP8 kernel candidate
#              (CUTLASS, torch._scaled_mm, the Triton GEMV tilings) against the byte floor and
#              the weight's read ceiling; then the Triton kernels against their exact products
#              (tests/gpu/test_fp8_gemv.py) (1.5); head-sweep adds the 22 tilings of
#              fp8_gemv.SWEEP at M = 1 and 4, fastest first, each GEMV also alone (99 took 1.5)
#   prepare    `ling-chat prepare` on the 6-layer model's config: the preflight, then every JIT
#              kernel built on the cut dummy model (7.5 on a bare machine); run again, it finds
#              its marker and returns at once
#   graphs     the stack booted with the recipe's batch-1 decode graphs and with SGLang's
#              default graph list: start stages, each capture's batch sizes, seconds and GB (2)
#   bench-exit `ling-chat bench` of the stack, one short request: the time from its table to
#              its exit (2)
#   thinking   a chat's thinking on the engine (tests/gpu/test_thinking_gpu.py, 6 layers, known
#              answer, one boot): thinking off gives the answer alone; a budget of 10 thinking
#              tokens cuts the 42-token reasoning there, `</think>` appended, and the answer
#              follows in full within its own budget; a roomy budget keeps the whole reasoning
#              (untried; after `prepare`; about 2)
#   engine     the stack passes every line (its ReplaySSM ring's too) and streams the known
#              answer at accept >= 3.5; weight-only sharing refused (2)
#   realckpt   the stack boots from real files: tests/gpu/test_checkpoint_gpu.py writes the 6-layer
#              known-answer checkpoint in inclusionAI/Ling-3.0-flash-fp4's layout to /root/ckpt6
#              (about 11.6 GB, kept for later runs), boots it with SGLang's default load format
#              and ling-chat's own scheduler entry, every proof line passes and the known answer
#              streams; then six broken copies (beside it, removed after) are refused by
#              `ling-chat doctor`'s checkpoint line naming tensor and file, exit 3 (untried;
#              after `prepare`; about 6). CKPT_LAYERS=12 writes /root/ckpt12 instead, the
#              folder load-bench reads (the same writer at the same depth), and marks it complete.
#              The boot also shows the NEXTN draft reading only its own layer's shards (under 1.5
#              x the checkpoint in two passes). realckpt-boot: the boot and the known answer
#              alone, no broken copies (12 layers: about 4, the checkpoint's writing included)
#   ckpt-write realckpt's known-answer folder /root/ckpt$CKPT_LAYERS alone, marked complete
#              (default 6; 6 layers: 18 s)
#   bench-peer `ling-chat bench --peer stock-sglang` on /root/ckpt$CKPT_LAYERS (default 12; after
#              ckpt-write, realckpt or realckpt-boot with the same CKPT_LAYERS, which mark the
#              folder complete; needs the `serve` extra wheels: stock SGLang's HTTP server, checked
#              before anything boots): bench's own prepare (on a bare machine it compiles every
#              kernel: 414 s), the stack in-process, then stock SGLang 0.5.23's own server
#              (python -m sglang.launch_server, the official recipe's flags, sm_90's attention
#              backend: BF16 head, weight-only head sharing, recurrent verify) on the same files
#              and workload (2048 in / 256 out, greedy, 2 reps x 2 prompts); its row, and its
#              decode ratio to the stack's with both accept lengths (both 4.00: the known answer
#              is in the files and a BF16 head shared by weight serves the draft exactly). Its
#              log: $OUT/bench-peer.stock-sglang.log. 6 layers on a bare machine after
#              `flashinfer`: 10.2 minutes (the two boots from the files and their requests 3.3)
#   peer6      stock SGLang beside the stack, split by lever, at 6 layers (issue #42): writes
#              /root/ckpt6 if it is not complete, then `ling-chat bench --profiles stack,
#              stack-recurrent,humming+nextn --peer stock-sglang --boots 3,stack-recurrent=1,
#              humming+nextn=1 --host-time` (2048 in / 256 out, 2 reps x 2 prompts): stack and
#              stock booted in turn 3 times each, then stack-recurrent and humming+nextn once;
#              each boot's decode tok/s and its host time a round (3 short/long pairs; GPU busy
#              under the profiler on each engine's first boot). Prints the ratio of boot medians
#              with their ranges, and the host table: each row against the one above splits the
#              difference by lever into GPU and host. $OUT/peer6.json (saved after each boot:
#              a cut run keeps what it measured); the stock server's log $OUT/peer6.stock.log;
#              then each profile's proof as its last boot judged it, every line (a stack boot
#              whose proof fails is refused: its rows would be missing).
#              Needs `flashinfer`, `prepare` and the `serve` extra wheels. Untried; estimated
#              9 (8 boots of about 1 minute, stock's first with its compiles about 1.7)
#   peer24     the same at 24 layers, stack and stock only (3 boots each): /root/ckpt24
#              (about 37 GB, real layout, known-answer weights; /root/ckpt6 and /root/ckpt12 are
#              removed first when the disk has under 45 GB free), then the bench as peer6's with
#              --profiles stack. $OUT/peer24.json. Untried; estimated 8.5 (the checkpoint about
#              1.2, 6 boots of about 1.2)
#   host-levers6  ling-chat's host levers each against all on, one machine, one run: the stack
#              at 6 layers on Triton attention (the H200's, host-bound), cores 2-9, booted with
#              all host levers on, without the fed ReplaySSM commit, without the GC freeze
#              (lab/scripts/gpu_host_time.py --off ,prepared_commit,gc_freeze; 16 and 256
#              tokens); per engine wall, GPU busy, idle, host loop and GC time a round; the
#              CPU's core speeds from sysfs printed first (on a uniform CPU the fast-cores lever
#              does nothing: no engine for it). $OUT/host-levers.json. Untried; estimated 3.5
#   commit-gpu the fed ReplaySSM commit's indices against SGLang's own on CUDA tensors
#              (tests/gpu/test_prepared_commit_gpu.py; no boot). Estimated 0.5
#   engine42   the same proof and reply on the full 42-layer model (2 dense + 40 MoE layers,
#              67.8 GB of dummy weights) at memory fraction 0.65, with start time by stage (1.5)
#   replayssm-state  with the KDA layers live, the request's KDA state after the same reply
#              from plain decoding, stack-recurrent's recurrent verify and the stack's
#              ReplaySSM (all drafts accepted, and none), four 6-layer engines one after
#              another (7.5); it prints where each state was found first
#   kernels42  every GPU kernel of one decode step (humming+fp8) and one verify round (stack)
#              at 42 layers, 2K context, for lab/scripts/spark_projection.py (KERNEL_PROFILES=...;
#              its FP8-head verdict takes stack-recurrent's round, as NVIDIA's stack verified)
#   kernels42-replayssm  one verify round at 42 layers of stack-recurrent (SGLang's recurrent
#              verify) and of the stack (KDA ReplaySSM, ring 8), known-answer weights, booted
#              one after the other (2.8)
#   depths42   stack-recurrent's verify round at 42 layers, 2K context, known-answer weights, at
#              each NEXTN depth of DEPTHS (default 2,4,3: the default last, so that a cut run
#              keeps the others), one engine each, files kernels-stack-recurrent-42-kK.json; then
#              lab/scripts/depth_eval.py over every depth profiled on this machine so far, with the
#              committed humming+fp8 step: its table, and $OUT/depth-eval.json. The proof's
#              NEXTN line fails off 3 steps (printed; the profile goes on). Known-answer weights
#              route every token to the same experts, the shared-routing bound; depths42-random
#              has random weights, tokens routed apart (files random-*). DEPTHS=1,5,7 adds
#              adaptive's other candidates. (about 1.5 a depth; 4.5 for three)
#              Without 3 in DEPTHS, depths42 takes depth 3 from kernels42-replayssm's
#              stack-recurrent run.
#   kernels42-dspark  one verify round of the dspark profile at 42 layers (a DSpark draft of
#              the real draft's shapes, dummy weights: accept about 1) (1.5)
#   host42     host time per verify round at 42 layers (lab/scripts/gpu_host_time.py on cores
#              2-9, known-answer weights, 2K context): the stack on Triton attention with
#              SGLang's own pin decision (none) and with the spec-v2 host pin forced on, one
#              engine each; per round the unprofiled wall time, the scheduler's waits on the GPU,
#              and GPU-busy time under the profiler; rows added to $OUT/host-time.json, the
#              table of every row so far printed (untried; about 4). host42-fi: the stack on
#              FlashInfer attention (the Spark recipe's; SGLang pins it, and it cannot run
#              unpinned); its MLA and prefill JIT modules are built on first use, on 8 cores
#              (untried; 2 plus the build, unknown: limit 560). host42-dspark, host42-dspark-fi:
#              the dspark profile at SGLang's own pin decision only (the stack's pair prices
#              the forced pin), its dummy draft accepting about 1, so 16 and 64 tokens (48
#              rounds between; untried; about 2.5 each, the -fi one plus FlashInfer's MHA builds
#              for the draft). Each needs the `flashinfer` extra wheels and `prepare` first;
#              host-fi-build before the -fi steps boots 6-layer stack and dspark engines on
#              FlashInfer on every core, so that FlashInfer's JIT modules (the same at any
#              depth) are built there, its rows thrown away (untried; 2 plus the builds)
#   host-projection  the Spark projection from the committed 42-layer kernel profiles with the
#              host term of $OUT/host-time.json (CPU only, seconds): the stack at accept 2.68 and
#              dspark at 5.29 per engine, in $OUT/spark-projection-host.json
#   bench-dspark  `ling-chat bench` over stack and dspark, synthetic and GSM8K-format, both at
#              the accept length SIM_ACCEPT (default 2.68) that SGLang simulates; the table
#              labels the rows simulated (3.5)
#   levers     the opt-in levers (tests/gpu/test_levers_gpu.py, 6 layers, known answer):
#              stack+bf16-router passes every line with every router gate BF16 (target and
#              NEXTN draft) and streams the known answer at accept >= 3.5; dspark+fp8-draft
#              passes every line with the draft's 20 layer linears on SGLang's FP8 method
#              (untried; two engines, about 3.5)
#   hot-vocab  the hot-vocabulary draft head (tests/gpu/test_hot_vocab_gpu.py, 6 layers, known
#              answer, stack+hot-vocab with a hot list of the test's own): every line passes,
#              its own included (the draft's logits on the 32K-row FP8 slice, bytes and scales
#              equal to the target's rows, ids mapped back, the verify on the full head), the
#              reply is the stack's known answer at accept >= 3.5; with every other answer
#              token cold the same reply at accept < 2.5 (untried; two engines, about 3.5)
#   kernels42-levers  one verify round at 42 layers, known-answer target, of stack,
#              stack+bf16-router, dspark and dspark+fp8-draft (the DSpark draft of dummy
#              weights: accept about 1), then lab/scripts/spark_projection.py over them with
#              the committed humming and humming+fp8 steps: each lever's projected round
#              against its base's (untried; four 42-layer engines, about 6)
#   bench-levers  `ling-chat bench` over stack, stack+bf16-router, dspark and dspark+fp8-draft
#              at LEVER_LAYERS (default 42; dummy weights, no accuracy), all at the accept
#              length SIM_ACCEPT (default 2.68) that SGLang simulates, rows labelled simulated:
#              each row's TPOT, the byte model's bytes a round and its proof with the router
#              gates' and the draft's measured bytes (untried; four 42-layer boots, about 7-8;
#              a cut run keeps the profiles done; LEVER_LAYERS=6 about 4)
#   caches     Humming's, Triton's and FlashInfer's kernel caches as 15 MiB pieces in $OUT;
#              kept in the git-ignored .gpu-cache/ and named in `carry`, a later machine
#              restores them before its first step
#   proof-breakages  through `ling-chat doctor` on the 6-layer known-answer model
#              (lab/scripts/gpu_proof_breakages.py), cheapest first, each case's exit status and
#              the line naming its cause: --sglang-arg moe_runner_backend=triton,
#              disable_cuda_graph=true, attention_backend=torch_native and the variable
#              SGLANG_SIMULATE_ACC_LEN=3.5 refused before loading (exit 2); humming hidden:
#              the preflight's lever-package line (exit 3); the stack passes, prefill
#              graphs stated off (exit 0); decode graphs off past the override check: the
#              graphs line fails first (exit 2); every Humming cubin, a FlashInfer module and
#              five Triton cubins truncated to 0 bytes: healed with a line each, prepared
#              again, the stack passes (exit 0). Untried; about 10 (after `prepare`)
#   breakages  random weights, no FP8 hook, BF16-view sharing with and without the guard,
#              FP32 head, speculation off, decode graphs off (the graphs line first): each
#              refused (8)
#   dspark     the dspark profile (DSpark draft of tests/gpu/dspark_models.py, ReplaySSM 32)
#              passes every line and streams the known answer; a bad ring refused (1.5);
#              dspark42 the same at 42 layers (2)
#   dspark-ui  the app chats through the dspark profile and raises its collapse banner on the
#              random draft's accept length (1.7)
#   dspark-breakages  a BF16 view of the head given to the DSpark draft, ReplaySSM off: each
#              refused (2)
#   auto       `auto` MoE refused (1.5; with no FlashInfer, SGLang fails to load it; with the
#              `flashinfer` extras it would start the baseline's long MoE build: EXTRA=/root/none)
#   marlin     Marlin MoE refused (over 4: cut at 200 and 240 s while capturing graphs)
#   ui         the app chats through the engine (the default profile, two known answers of about
#              2,300 tokens each); records the demo trace and a screenshot: copy
#              $OUT/h200-stack-known-answer.trace.json to assets/ as it is (2.5)
#   exits      every way out of the chat mid-reply gives the GPU back (tests/gpu/test_exit_gpu.py):
#              `ling-chat` on the 6-layer known-answer model on a pseudo-terminal, closed
#              (SIGHUP to the app and its process group) or sent SIGTERM mid-reply: the app and
#              SGLang's processes gone, the reply stored stopped, nvidia-smi's memory.used back
#              to its level before the start; a line each with the times and the memory
#              (untried; two boots, about 3; after `prepare`); exits-cold: the window case
#              alone with no `prepare` before it, its boot building every kernel (about 8)
#   hot-head   the hot-vocabulary draft head against the full FP8 head, no engine
#              (lab/scripts/gpu_hot_head_bench.py): each head's kernel as the lever's patch
#              picks it, its GPU time at M = 1 and 4 under CUDA graphs, M = 1 with L2 cold,
#              bytes, and the patch's selftest; $OUT/hot-head.json (untried; about 1, needs
#              only the kit: run it first)
#   serve      `ling-chat serve` proves itself over HTTP; a remote chat through the app; random
#              weights refused (3; needs the `serve` extra wheels, see below)
#   resident   `keep_engine` on the 6-layer known-answer model (lab/scripts/gpu_resident_bench.py):
#              a cold chat start leaves the engine resident, a second chat attaches (every proof
#              line re-checked, the known answer streamed), launch-to-composer timed for both
#              (goal <= 5 s attached), `engine status`, then the 60 s idle stop with nvidia-smi
#              memory before and after (untried; about 5; needs the `serve` extra wheels)
#   bench      `ling-chat bench` over humming, humming+fp8, humming+nextn, stack (4.5)
#   bench-boots  `ling-chat bench --boots 2` over humming and stack: the spread from one engine
#              boot to the next next to the levers' deltas (untried; 4 boots, 5 to 9)
#   baseline   `ling-chat bench` of the baseline (FlashInfer's MXFP4 MoE; needs the
#              `flashinfer` extra wheels). On sm_90 its first use JIT-compiles FlashInfer's
#              SM90 CUTLASS fused MoE: about 245 CUDA files, 13 core-hours of nvcc or more,
#              beyond what a session here can give; see lab/results/README.md
#   reasoning  `ling-chat bench` of humming and stack, synthetic and the GSM8K fixture (5-shot
#              CoT, 3 questions; random weights, so the accuracy is only exercised) (4)
#   ab         the NEXTN stack with the BF16 and the FP8 head side by side (humming+nextn and
#              stack-recurrent: both with the recurrent verify), 30 interleaved reps,
#              profiled (GPU kernels, Python, and CPU time, involuntary switches and cores of
#              each engine), both engines' SGLang processes on cores 4-5, known-answer weights
#              (accept 4); ab-fp8-first boots the engines in the other order (3 each);
#              ab-random has random weights (accept 1, profiled too; 5: 255 rounds a request);
#              ab-18 has 18 layers (3 groups of 5 KDA + 1 MLA; about 32 GB each: its timings
#              came after 5 minutes, then 4 silent ones until the cut, in shutdown as far as
#              the output tells; now timed); ab-30 has 30 (about 51 GB each; untried). Each
#              prints the FP8 speed-up by medians and per rep, with a 95% interval.
#   load-bench  the weight load by stage (lab/scripts/gpu_load_bench.py): writes once a
#              12-layer checkpoint of the real per-layer sizes at /root/ckpt12 (tests/gpu/
#              checkpoint.py, about 18 GB), measures the disk's read with the page cache dropped
#              (drop_caches, or POSIX_FADV_DONTNEED per shard where denied: it says which) and
#              warm, then boots the stack once per run: load-bench-ckpt writes the checkpoint
#              alone; load-bench-a boots auto, fastsafetensors and instanttensor cold;
#              load-bench-b the same three warm; load-bench-c instanttensor cold with the NEXTN
#              draft reading every shard again (SGLang's own load) and with ling-chat's (its
#              layer's shards only), side by side, then auto cold (each a step of its own, 560 s
#              at most; load-bench runs ckpt, a and b in turn; a boot about 1.7 with its import).
#              Rows go to $OUT/load-bench.json as they come; each step ends with the table of
#              every row so far, a line per format that failed or fell back, and the fastest
#              that passed. Needs the `loadfmt` extra wheels (fastsafetensors, instanttensor)
#              and `prepare` first. Untried; about 4 for a and for b (a boot about 1 each),
#              the checkpoint unknown (about 18 GB written)
# Give the `device` call timeout_s 600: a step's limit (560 at most) leaves the time its logs
# and stack dumps need to come back (an ab-18 cut by a 560 s call returned nothing of them).
# Pytest runs unbuffered and is stopped with SIGINT at its limit, so a cut run still prints
# what it saw and its summary.
#
# Packages the staging kit lacks travel as extra wheels: `bash lab/scripts/gpu_extra_wheels.sh
# serve` (SGLang's HTTP server needs jsonschema and soundfile) or `... flashinfer` prints the
# transfers that put them in /root/extra; this script joins split wheels there and installs
# them all. FlashInfer is SGLang 0.5.23's own dependency: without it the NEXTN verify cannot
# sample (top-k/top-p renormalisation), so every engine with NEXTN now fails its sampled
# warm-up, and the `baseline` profile has no MoE. Each step also keeps the end of every SGLang
# log it wrote, as NAME.sglang-N.log.
set -u
echo $$ 2>/dev/null >/root/agenda.pid || true  # lab/scripts/gpu_poll.sh: is an agenda running
OUT="${OUT:-/tmp/gpu-out}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# Triton's autotuning lands in SGLang's logs. FLASHINFER_JIT_VERBOSE stays unset: FlashInfer
# 0.7.2 then builds its JIT modules with -g -O0 --device-debug, and its sampling module did not
# finish in 300 s.
export TRITON_PRINT_AUTOTUNING=1
unset FLASHINFER_JIT_VERBOSE
# Bounded compile parallelism for every JIT builder (ninja's -j for FlashInfer and torch's
# extensions): each nvcc job of a CUTLASS module can take 5-10 GB.
export MAX_JOBS="${MAX_JOBS:-8}"
ulimit -c 0  # the stack dumps of a stuck step (SIGABRT, below) need no core files
EXTRA="${EXTRA:-/root/extra}"
for first in "$EXTRA"/*.part-00; do
  [ -e "$first" ] || break
  whl="${first%.part-00}"
  cat "$whl".part-* >"$whl" && rm "$whl".part-*
done
# The extra wheels install once per machine: reinstalling them on every call changed their
# files' times, and ninja then rebuilt JIT modules that were already built.
if compgen -G "$EXTRA/*.whl" >/dev/null; then
  stamp="/tmp/site/.ling-extra-$(ls "$EXTRA"/*.whl | md5sum | cut -c1-12)"
  if [[ ! -e "$stamp" ]]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site "$EXTRA"/*.whl && touch "$stamp"
  fi
  export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
# Kernel caches of an earlier session (`caches` below), carried as .gpu-cache/: restored once.
if compgen -G ".gpu-cache/cache.tgz.part-*" >/dev/null && [[ ! -e /root/.ling-cache-restored ]]; then
  cat .gpu-cache/cache.tgz.part-* | tar xzf - -C /root && touch /root/.ling-cache-restored
  echo "kernel caches restored from .gpu-cache ($(du -sh /root/.humming /root/.cache/sglang 2>/dev/null | tr '\n' ' '))"
fi

# Estimated seconds of the steps of issue #42 on a machine after `flashinfer` and `prepare`
# (printed with each step's header; untried until they have run once).
DUMMY="--sglang-arg load_format=dummy"  # a model folder of config alone: no weights to check
# Beside stock SGLang, ling-chat's engines read the files as stock does (`auto`): the rows then
# differ by ling-chat's levers alone (the loader changes no decode step), and no boot needs the
# `loadfmt` wheels (sm_90's default, instanttensor, failed every boot of peer6 without them).
PEER_LOAD="--sglang-arg load_format=auto"
declare -A ESTIMATE=([commit-gpu]=30 [ckpt-write-24]=75 [peer6]=540 [peer24]=440 [host-levers6]=210)

run() {  # run NAME LIMIT_S COMMAND...: its output, and the end of each SGLang log it wrote
  local name="$1" limit="$2" marker n=0 watcher
  shift 2
  marker=$(mktemp)
  echo "== $name (limit ${limit}s${ESTIMATE[$name]:+, estimated ${ESTIMATE[$name]}s}) $(date +%T)"
  # GPU memory in use every 500 ms: the step's peak is the largest line. Written outside $OUT
  # and copied in at the end: a call that fetches $OUT mid-step takes its files away.
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 >"/tmp/$name.mem" 2>/dev/null &
  local smi=$!
  # A step still running 15 s before its limit is stuck somewhere: SIGABRT makes every
  # SGLang child print where each of its threads is (PYTHONFAULTHANDLER) into its log.
  (sleep $((limit - 15)) && pkill -ABRT -f spawn_main) >/dev/null 2>&1 &
  watcher=$!
  PYTHONFAULTHANDLER=1 timeout -s INT "$limit" "$@" 2>&1 | tee "/tmp/$name.log" \
    | grep -v "tokenizer you are loading" | tail -60
  echo "== $name exit ${PIPESTATUS[0]} $(date +%T); peak GPU memory $(sort -n "/tmp/$name.mem" | tail -1) MiB"
  kill "$smi" 2>/dev/null
  cp "/tmp/$name.mem" "/tmp/$name.log" "$OUT/"
  pkill -P "$watcher" 2>/dev/null  # its sleep, which would outlive it
  kill "$watcher" 2>/dev/null
  while IFS= read -r log; do
    n=$((n + 1))
    { echo "# $log"; tail -c 300000 "$log" | grep -v "server_args=\|ServerArgs("; } >"$OUT/$name.sglang-$n.log"
  done < <(find /root /tmp -maxdepth 6 \( -name site-packages -o -name .git \) -prune \
    -o -name sglang.log -newer "$marker" -print 2>/dev/null)
  rm -f "$marker"
}

gpu_tests() {  # gpu_tests NAME LIMIT_S FILE [PYTEST ARGS...]
  local name="$1" limit="$2"
  shift 2
  run "$name" "$limit" python3 -m pytest --run-gpu -s -p no:cacheprovider -rA "$@"
}

bench() {  # bench NAME LIMIT_S PROFILES [ARGS...]: `ling-chat bench`, 6-layer model, random weights
  local name="$1" limit="$2" profiles="$3"
  shift 3
  python3 -c "from pathlib import Path; from tests.gpu import models; models.write_model_dir(Path('/root/m6'))"
  run "$name" "$limit" python3 -m app bench --model /root/m6 --sglang-arg load_format=dummy \
    --allow-unproven --profiles "$profiles" --input-len 2048 --output-len 256 --num-prompts 2 \
    --reps 2 --peak-gbps 4800 --json "$OUT/$name.json" "$@"
}

ckpt_write() {  # ckpt_write LAYERS: /root/ckptLAYERS written and marked complete, unless it is
  local layers="$1"
  [[ -e "/root/ckpt$layers/.ling-chat-complete" ]] && return 0
  LING_CHAT_TEST_LAYERS="$layers" run "ckpt-write-$layers" 400 python3 -c "from pathlib import Path
from tests.gpu.test_checkpoint_gpu import written_checkpoint
written_checkpoint(Path('/root/ckpt$layers'))"
  [[ -e "/root/ckpt$layers/written-by-tests-gpu-checkpoint" ]] && echo "$layers" >"/root/ckpt$layers/.ling-chat-complete"
}

peer_bench() {  # peer_bench NAME LAYERS PROFILES BOOTS: the stock server beside the profiles
  local name="$1" ckpt="/root/ckpt$2"
  if [[ ! -e "$ckpt/.ling-chat-complete" ]]; then
    echo "$name: no complete $ckpt"
  elif ! python3 -c "import jsonschema, soundfile" 2>/dev/null; then
    echo "$name: stock SGLang's HTTP server needs the serve extra wheels (jsonschema, soundfile)"
  else
    run "$name" 900 python3 -m app bench --model "$ckpt" --profiles "$3" $PEER_LOAD --peer stock-sglang \
      --peer-wait 360 --boots "$4" --host-time --input-len 2048 --output-len 256 \
      --num-prompts 2 --reps 2 --peak-gbps 4800 --json "$OUT/$name.json"
    peer_log=$(find /root -maxdepth 6 -name stock-sglang.log -mmin -20 2>/dev/null | head -1)
    [[ -n "$peer_log" ]] && tail -c 300000 "$peer_log" >"$OUT/$name.stock.log"
    # each profile's proof as its last boot judged it (a boot whose proof failed was refused)
    [[ -s "$OUT/$name.json" ]] && python3 -c "import json, sys
from app.core.proof_report import ProofReport
from app.render.proof import format_report
for p in json.load(open(sys.argv[1]))['profiles']:
    if p['proof']:
        print(p['profile'] + ':', format_report(ProofReport.from_dict(p['proof'])))" "$OUT/$name.json"
  fi
}

for step in "$@"; do
  case "$step" in
    flashinfer) run flashinfer 300 python3 lab/scripts/gpu_flashinfer_check.py ;;
    flashinfer-moe) run flashinfer-moe 560 python3 lab/scripts/gpu_flashinfer_check.py --moe ;;
    prepare)
      python3 -c "from pathlib import Path; from tests.gpu import models; models.write_model_dir(Path('/root/m6'))"
      # /root/m6 holds a config and a tokenizer, no weights: `load_format=dummy` says so, and
      # the preflight then reads no checkpoint (the prepare's marker leaves load_format out).
      run prepare 540 python3 -m app prepare --model /root/m6 --data-dir /root/lcd $DUMMY
      [[ -s "$OUT/prepare.log" ]] && grep -q "preflight" "$OUT/prepare.log" && ! grep -q "cached for later" "$OUT/prepare.log" \
        && run prepare-skip 540 python3 -m app prepare --model /root/m6 --data-dir /root/lcd $DUMMY --skip-preflight
      run prepare-again 120 python3 -m app prepare --model /root/m6 --data-dir /root/lcd $DUMMY --skip-preflight ;;
    graphs)
      run graphs 540 python3 lab/scripts/gpu_graph_settings.py /root/graphs
      cp /root/graphs/graphs.json "$OUT/" 2>/dev/null ;;
    bench-exit)
      python3 -c "from pathlib import Path; from tests.gpu import models; models.write_model_dir(Path('/root/m6'))"
      # Each line stamped: the table's last line and the exit, to the hundredth of a second.
      run bench-exit 300 bash -c 'python3 -m app bench --model /root/m6 --sglang-arg load_format=dummy \
        --allow-unproven --skip-preflight --profiles stack --input-len 512 --output-len 64 \
        --num-prompts 1 --reps 1 --json "$0/bench-exit.json" 2>&1 | while IFS= read -r l; do echo "$(date +%T.%2N) $l"; done
        echo "$(date +%T.%2N) exited"' "$OUT" ;;
    head)
      run head 400 python3 lab/scripts/gpu_head_bench.py --json "$OUT/head.json"
      gpu_tests gemv 300 tests/gpu/test_fp8_gemv.py ;;
    head-sweep) run head-sweep 540 python3 lab/scripts/gpu_head_bench.py --sweep --json "$OUT/head-sweep.json" ;;
    engine) gpu_tests engine 520 tests/gpu/test_engine_gpu.py -k "stack_passes and replayssm or weight_only" ;;
    realckpt)  # CKPT_LAYERS=12: the same writer's 12-layer folder, then reused by load-bench
      layers="${CKPT_LAYERS:-6}"
      LING_CHAT_TEST_LAYERS="$layers" LING_CHAT_TEST_CHECKPOINT="/root/ckpt$layers" \
        gpu_tests realckpt 540 tests/gpu/test_checkpoint_gpu.py
      [[ -e "/root/ckpt$layers/written-by-tests-gpu-checkpoint" ]] && echo "$layers" >"/root/ckpt$layers/.ling-chat-complete" ;;
    realckpt-boot)  # realckpt without the broken copies: the boot and the known answer only
      layers="${CKPT_LAYERS:-6}"
      LING_CHAT_TEST_LAYERS="$layers" LING_CHAT_TEST_CHECKPOINT="/root/ckpt$layers" \
        gpu_tests realckpt-boot 540 tests/gpu/test_checkpoint_gpu.py -k stack_boots
      [[ -e "/root/ckpt$layers/written-by-tests-gpu-checkpoint" ]] && echo "$layers" >"/root/ckpt$layers/.ling-chat-complete" ;;
    ckpt-write)  # realckpt's folder alone, no boot (bench-peer's stack row boots from it)
      layers="${CKPT_LAYERS:-6}"
      LING_CHAT_TEST_LAYERS="$layers" run ckpt-write 400 python3 -c "from pathlib import Path
from tests.gpu.test_checkpoint_gpu import written_checkpoint
written_checkpoint(Path('/root/ckpt$layers'))"
      [[ -e "/root/ckpt$layers/written-by-tests-gpu-checkpoint" ]] && echo "$layers" >"/root/ckpt$layers/.ling-chat-complete" ;;
    bench-peer)
      ckpt="/root/ckpt${CKPT_LAYERS:-12}"
      if [[ ! -e "$ckpt/.ling-chat-complete" ]]; then
        echo "bench-peer: no complete $ckpt: run CKPT_LAYERS=${CKPT_LAYERS:-12} realckpt-boot or ckpt-write first"
      elif ! python3 -c "import jsonschema, soundfile" 2>/dev/null; then
        echo "bench-peer: stock SGLang's HTTP server needs the serve extra wheels (jsonschema, soundfile)"
      else
        run bench-peer 900 python3 -m app bench --model "$ckpt" --profiles stack $PEER_LOAD \
          --peer stock-sglang --peer-wait 360 --input-len 2048 --output-len 256 --num-prompts 2 \
          --reps 2 --peak-gbps 4800 --json "$OUT/bench-peer.json"
        peer_log=$(find /root -maxdepth 6 -name stock-sglang.log -mmin -15 2>/dev/null | head -1)
        [[ -n "$peer_log" ]] && tail -c 300000 "$peer_log" >"$OUT/bench-peer.stock-sglang.log"
      fi ;;
    peer6)
      ckpt_write 6
      peer_bench peer6 6 stack,stack-recurrent,humming+nextn 3,stack-recurrent=1,humming+nextn=1 ;;
    peer24)
      if [[ ! -e /root/ckpt24/.ling-chat-complete ]] && (($(df --output=avail -BG /root | tail -1 | tr -dc 0-9) < 45)); then
        echo "peer24: under 45 GB free: removing /root/ckpt6 and /root/ckpt12"
        rm -rf /root/ckpt6 /root/ckpt12
      fi
      df -h /root | tail -1
      ckpt_write 24
      peer_bench peer24 24 stack 3 ;;
    host-levers6)
      echo "cores by cpu_capacity (count value): $(cat /sys/devices/system/cpu/cpu*/cpu_capacity 2>/dev/null | sort | uniq -c | tr -s ' \n' ' ')"
      echo "cores by cpuinfo_max_freq: $(cat /sys/devices/system/cpu/cpu*/cpufreq/cpuinfo_max_freq 2>/dev/null | sort | uniq -c | tr -s ' \n' ' ')"
      run host-levers6 560 taskset -c 2-9 python3 lab/scripts/gpu_host_time.py /root/host-levers6 \
        --json "$OUT/host-levers.json" --layers 6 --profiles stack --backends triton --pins auto \
        --off ,prepared_commit,gc_freeze --tokens 16,256 ;;
    commit-gpu) gpu_tests commit-gpu 200 tests/gpu/test_prepared_commit_gpu.py ;;
    engine42)
      LING_CHAT_TEST_LAYERS=42 LING_CHAT_TEST_MEM_FRACTION=0.65 \
        gpu_tests engine42 560 tests/gpu/test_engine_gpu.py -k "stack_passes and replayssm" ;;
    replayssm-state) gpu_tests replayssm-state 560 tests/gpu/test_replayssm_gpu.py ;;
    kernels42)
      run kernels42 560 python3 lab/scripts/gpu_kernel_profile.py /root/k42 --layers 42 \
        --profiles "${KERNEL_PROFILES:-humming+fp8,stack}" --known-answer
      cp /root/k42/kernels-*.json "$OUT/" 2>/dev/null ;;
    kernels42-replayssm)  # the stack's round with the recurrent verify and with ReplaySSM
      run kernels42-replayssm 560 python3 lab/scripts/gpu_kernel_profile.py /root/k42r --layers 42 \
        --profiles stack-recurrent,stack --known-answer
      cp /root/k42r/kernels-*.json "$OUT/" 2>/dev/null ;;
    kernels42-dspark)  # the dspark profile's round (a DSpark draft of dummy weights: accept ~1)
      run kernels42-dspark 400 python3 lab/scripts/gpu_kernel_profile.py /root/k42d --layers 42 \
        --profiles dspark --known-answer
      cp /root/k42d/kernels-*.json "$OUT/" 2>/dev/null ;;
    host42 | host42-fi | host42-dspark | host42-dspark-fi)
      args=(--profiles stack --backends triton)
      # dspark: SGLang's own pin decision only (the stack's Triton pair prices the pin on
      # identical kernels), and a shorter long request (its dummy draft accepts about 1)
      [[ "$step" == *dspark* ]] && args=(--profiles dspark --backends triton --pins auto --tokens 16,64)
      [[ "$step" == *-fi ]] && args[3]=flashinfer
      # fixed cores, as for `ab`: engine processes on shared cores differed 1.45x in host speed
      run "$step" 560 taskset -c 2-9 python3 lab/scripts/gpu_host_time.py "/root/$step" \
        --json "$OUT/host-time.json" "${args[@]}" ;;
    host-fi-build)  # FlashInfer's MLA and MHA modules, built on all cores; the rows are not kept
      run host-fi-build 560 python3 lab/scripts/gpu_host_time.py /root/host-fi-build \
        --json /root/host-fi-build.json --profiles stack,dspark --backends flashinfer --layers 6 \
        --reps 1 ;;
    host-projection)
      run host-projection 60 python3 lab/scripts/spark_projection.py \
        lab/results/2026-12-01-h200-kernels-{humming,humming-fp8,humming-nextn}-42.json \
        lab/results/2026-12-01-h200-session9-kernels-stack-42*.json \
        lab/results/2026-12-01-h200-session10-kernels-dspark-42.json \
        --host "$OUT/host-time.json" --out "$OUT/spark-projection-host.json" ;;
    levers) gpu_tests levers 520 tests/gpu/test_levers_gpu.py ;;
    hot-vocab) gpu_tests hot-vocab 520 tests/gpu/test_hot_vocab_gpu.py ;;
    kernels42-levers)  # each opt-in lever's round beside its base's, and their projection
      run kernels42-levers 560 python3 lab/scripts/gpu_kernel_profile.py /root/k42l --layers 42 \
        --profiles stack,stack+bf16-router,dspark,dspark+fp8-draft --known-answer
      cp /root/k42l/kernels-*.json "$OUT/" 2>/dev/null
      run kernels42-levers-projection 60 python3 lab/scripts/spark_projection.py \
        lab/results/2026-12-01-h200-kernels-humming-42.json \
        lab/results/2026-12-01-h200-kernels-humming-fp8-42.json /root/k42l/kernels-*.json \
        --out "$OUT/spark-projection-levers.json" ;;
    bench-levers)  # the opt-in levers' bench rows beside their base profiles'
      layers="${LEVER_LAYERS:-42}"
      python3 -c "from pathlib import Path; from tests.gpu import dspark_models, models; \
models.write_model_dir(Path('/root/m$layers'), $layers); \
dspark_models.write_draft_dir(Path('/root/d$layers'), $layers)"
      SGLANG_SIMULATE_ACC_LEN="${SIM_ACCEPT:-2.68}" run bench-levers 560 python3 -m app bench \
        --model "/root/m$layers" --sglang-arg load_format=dummy --dspark-draft "/root/d$layers" --allow-unproven \
        --profiles stack,stack+bf16-router,dspark,dspark+fp8-draft --input-len 2048 \
        --output-len 128 --num-prompts 1 --reps 2 --peak-gbps 4800 --json "$OUT/bench-levers.json" ;;
    bench-dspark)  # stack and dspark side by side, both at one simulated accept length
      python3 -c "from pathlib import Path; from tests.gpu import dspark_models; dspark_models.write_draft_dir(Path('/root/d6'), 6)"
      SGLANG_SIMULATE_ACC_LEN="${SIM_ACCEPT:-2.68}" bench bench-dspark 560 stack,dspark \
        --dspark-draft /root/d6 --workload both --dataset tests/fixtures/gsm8k_small.jsonl ;;
    depths42 | depths42-random)
      weights=--known-answer prefix=
      [[ "$step" == depths42-random ]] && weights= prefix=random-
      run "$step" 560 python3 lab/scripts/gpu_kernel_profile.py "/root/$step" --layers 42 \
        --profiles stack-recurrent --steps "${DEPTHS:-2,4,3}" ${weights:+"$weights"}
      for f in "/root/$step"/kernels-stack-recurrent-42-k*.json; do
        [[ -e "$f" ]] && cp "$f" "$OUT/$prefix${f##*/}"
      done
      extra=()  # without 3 in DEPTHS, kernels42-replayssm's known-answer stack-recurrent is depth 3
      [[ "$step" == depths42 && ",${DEPTHS:-2,4,3}," != *,3,* && -e /root/k42r/kernels-stack-recurrent-42.json ]] &&
        extra=(/root/k42r/kernels-stack-recurrent-42.json)
      run "$step-eval" 60 python3 lab/scripts/depth_eval.py --profiles "/root/$step"/kernels-stack-recurrent-42-k*.json "${extra[@]}" \
        --decode-profile lab/results/2026-12-01-h200-kernels-humming-fp8-42.json --out "$OUT/${prefix}depth-eval.json" ;;
    caches)  # the kernel caches, in pieces that come back through $OUT, for .gpu-cache/
      tar czf /root/cache.tgz -C /root .humming .cache/sglang 2>/dev/null
      split -b 15m -d -a 2 /root/cache.tgz "$OUT/cache.tgz.part-"
      ls -la "$OUT"/cache.tgz.part-* ;;
    proof-breakages)
      for cases in "moe-triton no-graphs-flag torch-native simulated-accept humming-hidden stack" \
        graphs-off caches-truncated; do
        # shellcheck disable=SC2086  # the case names are words
        run "proof-breakages-${cases##* }" 560 python3 lab/scripts/gpu_proof_breakages.py \
          /root/m6ka /root/lcd-proof $cases
      done ;;
    breakages) gpu_tests breakages 560 tests/gpu/test_engine_gpu.py -k "random or no_fp8_hook or bf16_view or fp32 or speculation or graphs_off" ;;
    dspark) gpu_tests dspark 520 tests/gpu/test_dspark_gpu.py -k "passes or ring" ;;
    dspark42) LING_CHAT_TEST_LAYERS=42 LING_CHAT_TEST_MEM_FRACTION=0.65 \
        gpu_tests dspark42 560 tests/gpu/test_dspark_gpu.py -k passes ;;
    dspark-ui) gpu_tests dspark-ui 300 tests/gpu/test_dspark_gpu.py -k banner ;;
    dspark-breakages) gpu_tests dspark-breakages 560 tests/gpu/test_dspark_gpu.py -k breakage ;;
    auto) gpu_tests auto 200 tests/gpu/test_engine_gpu.py -k auto ;;
    marlin) gpu_tests marlin 500 tests/gpu/test_engine_gpu.py -k marlin ;;
    ui) gpu_tests ui 360 tests/gpu/test_ui_gpu.py ;;
    thinking) gpu_tests thinking 240 tests/gpu/test_thinking_gpu.py ;;
    exits) gpu_tests exits 500 tests/gpu/test_exit_gpu.py ;;
    hot-head) run hot-head 240 python3 lab/scripts/gpu_hot_head_bench.py --json "$OUT/hot-head.json" ;;
    exits-cold)  # the window case alone on a bare machine, its boot building every kernel
      gpu_tests exits-cold 580 tests/gpu/test_exit_gpu.py -k window ;;
    serve) gpu_tests serve 360 tests/gpu/test_serve_gpu.py ;;
    resident) run resident 560 python3 lab/scripts/gpu_resident_bench.py /root/resident ;;
    bench) bench bench 400 humming,humming+fp8,humming+nextn,stack ;;
    bench-boots) bench bench-boots 560 humming,stack --boots 2 ;;
    baseline) bench baseline 560 baseline,humming ;;
    reasoning) bench reasoning 400 humming,stack --workload both --dataset tests/fixtures/gsm8k_small.jsonl ;;
    ab | ab-fp8-first | ab-random | ab-18 | ab-30)
      args=(--known-answer --reps 30 --profile --pin-engines 4,5)
      case "$step" in
        ab-fp8-first) args+=(--fp8-first) ;;
        ab-random) args=(--reps 30 --profile --pin-engines 4,5) ;;
        ab-18) args=(--known-answer --reps 30 --layers 18 --mem-fraction 0.4 --pin-engines 4,5) ;;
        ab-30) args=(--known-answer --reps 30 --layers 30 --mem-fraction 0.45 --pin-engines 4,5) ;;
      esac
      run "$step" 560 taskset -c 2-9 python3 lab/scripts/gpu_stack_ab.py "/root/$step" "${args[@]}"
      cp "/root/$step/ab.json" "$OUT/$step.json" 2>/dev/null ;;
    load-bench | load-bench-ckpt | load-bench-a | load-bench-b | load-bench-c)
      parts=(ckpt a b)
      [[ "$step" != load-bench ]] && parts=("${step##*-}")
      for part in "${parts[@]}"; do
        args=(--checkpoint-only)
        [[ "$part" == a ]] && args=(--runs auto:cold,fastsafetensors:cold,instanttensor:cold)
        [[ "$part" == b ]] && args=(--runs auto:warm,fastsafetensors:warm,instanttensor:warm)
        [[ "$part" == c ]] && args=(--runs instanttensor:cold:all,instanttensor:cold,auto:cold)
        [[ "$part" != ckpt ]] && args+=(--json "$OUT/load-bench.json")
        run "load-bench-$part" 560 python3 lab/scripts/gpu_load_bench.py /root/load-bench \
          --checkpoint /root/ckpt12 --layers 12 "${args[@]}"
      done ;;
    *) echo "unknown step: $step" >&2; exit 2 ;;
  esac
done
echo "== agenda done $(date +%T)"  # lab/scripts/gpu_poll.sh returns at this line
