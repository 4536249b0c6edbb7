# The environment of rlscale's processes on a lent GPU machine, sourced by bench/smollm2_study.sh and
# bench/device_queue.sh (SRC: the source tree; SITE: where `smollm2_study.sh setup` installs the wheels the
# image lacks, default /tmp/site).
SITE=${SITE:-/tmp/site}
# byte-code as a normal install has it: images that set PYTHONDONTWRITEBYTECODE and ship torch without
# __pycache__ recompile every imported module in every process (about 10 s); setup compiles them once
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-/tmp/pycache}
export PYTHONPATH="$SITE:$SRC" PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export TORCHINDUCTOR_COMPILE_THREADS=${TORCHINDUCTOR_COMPILE_THREADS:-4}  # a pool per process, many processes
