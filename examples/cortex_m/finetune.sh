#!/usr/bin/env bash
# Fine-tuning on a microcontroller, end to end (called by run.sh): the tiny Llama's checkpoint
# converted into an int8 flash image of the fine-tune's type (tiny::lora_int8: rank-4 adapters on
# q and v); the host's scalar build of finetune.cpp encodes the new text and trains; the firmware,
# given those ids, trains on MPS2 AN500 (Cortex-M7) with its RAM cut to 256 KB (mps2_an500_256k.ld,
# a 16 KB stack region); then checked: the loss falls, every printed loss equals the host's (bits),
# the memory map it prints (ct::adapter_training_memory) equals the linker's symbol sizes, the image
# links no heap, the stack (painted) stays below 3/4 of its region.
#   examples/cortex_m/finetune.sh OUT_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
mkdir -p "$out/host-headers" && ln -sfn /usr/include/boost "$out/host-headers/boost"
python3 "$root/tools/export.py" --tokenizer "$root/examples/data/docs_sp512.model" "$out/tok.safetensors" \
  --header "$out/tiny_tokenizer.hpp" --name tiny_tokenizer >/dev/null
common=(-std=c++20 -ffp-contract=off -fno-exceptions -fno-rtti -Wall -Wextra -Wpedantic -Werror -I"$root/include" -I"$here")
g++ -std=c++20 -O1 -DCTFORMER_SCALAR -DTINY_LORA -I"$root/include" -I"$root" -I"$here" "$here/convert_tiny.cpp" -o "$out/convert"
"$out/convert" "$root/examples/data/tiny_llama.safetensors" "$out" tiny_weights >/dev/null
g++ "${common[@]}" -O2 -march=x86-64-v3 -DCTFORMER_SCALAR -I"$out" \
  -DTINY_BANNER="\"tiny Llama, int8 weights frozen, LoRA r4 on q,v: host, scalar kernels\"" "$here/finetune.cpp" -o "$out/host"
"$out/host" > "$out/host.txt"
cat "$out/host.txt"
ids=$(sed -n 's/^text ids: //p' "$out/host.txt")
elf="$out/an500-finetune.elf"
arm-none-eabi-g++ "${common[@]}" -O2 -mcpu=cortex-m7 -mfpu=fpv5-d16 -mthumb -mfloat-abi=hard -ffunction-sections -fdata-sections \
  -isystem "$out/host-headers" -I"$out" "-DTINY_TEXT_IDS=$ids" \
  -DTINY_BANNER="\"tiny Llama, int8 weights frozen in flash, LoRA r4 on q,v: MPS2 AN500 (cortex-m7), 256 KB RAM\"" \
  -nostartfiles -L"$here" -T "$here/mps2_an500_256k.ld" -Wl,--defsym=STACK_SIZE=16384 --specs=nano.specs --specs=nosys.specs \
  -Wl,--gc-sections "$here/finetune.cpp" "$here/startup.cpp" -lm -o "$elf"
if arm-none-eabi-nm -C "$elf" | grep -E "__cxa_throw|__cxa_allocate|typeinfo for|malloc|_sbrk|operator new"; then
  echo "the fine-tune firmware links exception machinery, RTTI or the heap (above)"; exit 1
fi
log="$out/an500.txt"
timeout 900 qemu-system-arm -M mps2-an500 -nographic -monitor none -serial none -icount shift=0 \
  -semihosting-config enable=on,target=native -kernel "$elf" > "$log" 2>&1 || { cat "$log"; echo "!! the fine-tune failed on the board"; exit 1; }
cat "$log"
losses() { grep -E "^(loss|step)" "$1"; }
if ! cmp -s <(losses "$log") <(losses "$out/host.txt"); then
  echo "!! the board's losses differ from the host's scalar build:"; diff <(losses "$out/host.txt") <(losses "$log") || true; exit 1
fi
echo "== an500 fine-tune: every loss equals the host's scalar build, bit for bit"
python3 "$here/memory_map_check.py" "$log" "$elf" finetune || { echo "!! the fine-tune's memory map differs from the linker's"; exit 1; }
echo "== an500 fine-tune: the memory map equals the linker's symbol sizes"
arm-none-eabi-size -A "$elf" | awk '$1 == ".data" || $1 == ".bss" { ram += $2 } END { printf "== static RAM (.data + .bss): %d bytes of 262144 (a 16 KB stack region above)\n", ram }'
stack=$(sed -n 's/^stack high-water mark: \([0-9]*\) bytes/\1/p' "$log")
if [ -z "$stack" ] || [ "$stack" -gt 12288 ]; then echo "!! the fine-tune's stack ($stack bytes) above 12 KB of its 16 KB"; exit 1; fi
echo "== an500 fine-tune: stack $stack bytes (region 16384); RAM in all $(( $(arm-none-eabi-size -A "$elf" | awk '$1 == ".data" || $1 == ".bss" { r += $2 } END { print r }') + stack )) bytes"
