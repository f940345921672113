#!/usr/bin/env bash
# Text on microcontrollers, end to end (called by run.sh): the tiny Llama's checkpoint
# (examples/data/tiny_llama.safetensors, trained by examples/train_tiny_llama.cpp) converted on the
# build machine into int8 and int4 flash images, its tokenizer's tables into constexpr data; the
# firmware (text.cpp) built for three boards qemu-system-arm emulates — MPS2 AN500 (Cortex-M7),
# AN386 (Cortex-M4F), AN505 (Cortex-M33) — and run there; then checked:
#   - its tokens and the bits of every logit equal the host's scalar build of the same file;
#   - the memory map it prints (compile-time constants) equals the linker's symbol sizes;
#   - its stack high-water mark, measured by painting, is within the static bound (stack_bound.py)
#     and the bound within 2x of it;
#   - its code size (-Os and -O2) stays under the thresholds below.
#   examples/cortex_m/text.sh OUT_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
ckpt="$root/examples/data/tiny_llama.safetensors"
mkdir -p "$out/host-headers" && ln -sfn /usr/include/boost "$out/host-headers/boost"

python3 "$root/tools/export.py" --tokenizer "$root/examples/data/docs_sp512.model" "$out/tok.safetensors" \
  --header "$out/tiny_tokenizer.hpp" --name tiny_tokenizer >/dev/null
# The deterministic arithmetic: no contraction of a·b + c anywhere (GCC contracts by default on ARM),
# the library's fused multiply-adds as one instruction on every side (the boards' FPUs fuse; the
# host reference is built for x86-64-v3, which has FMA).
common=(-std=c++20 -ffp-contract=off -fno-exceptions -fno-rtti -Wall -Wextra -Wpedantic -Werror -I"$root/include")

for fmt in int8 int4; do
  d="$out/$fmt"; mkdir -p "$d"
  flag=""; [ $fmt = int4 ] && flag=-DTINY_INT4
  g++ -std=c++20 -O1 -DCTFORMER_SCALAR $flag -I"$root/include" -I"$root" -I"$here" "$here/convert_tiny.cpp" -o "$d/convert"
  "$d/convert" "$ckpt" "$d" tiny_weights >/dev/null
  # (the generated header names the type by its format; text.cpp includes it as tiny_weights.hpp)
  g++ "${common[@]}" -O2 -march=x86-64-v3 -DCTFORMER_SCALAR $flag -I"$here" -I"$d" -I"$out" \
    -DTINY_BANNER="\"tiny Llama, $fmt weights: host, scalar kernels\"" "$here/text.cpp" -o "$d/host"
  "$d/host" > "$d/host.txt"
done

# board  qemu machine  compiler flags  linker script  logits' bits equal the host's
# (a single-precision FPU gets newlib's fdlibm expf, not the double-based one glibc and the M7's
# newlib share: a last-bit difference in places; the tokens are equal, the bits are not)
boards=("an500 mps2-an500 -mcpu=cortex-m7 -mfpu=fpv5-d16 mps2_an500.ld bits"
        "an386 mps2-an386 -mcpu=cortex-m4 -mfpu=fpv4-sp-d16 mps2_an500.ld tokens"
        "an505 mps2-an505 -mcpu=cortex-m33 -mfpu=fpv5-sp-d16 mps2_an505.ld tokens")
firmware() {  # board fmt opt [name extra-flags...] -> $out/$fmt/$board[name]$opt.elf
  local b=($1) fmt=$2 opt=$3 name=${4:-} flag=""
  shift 3; [ $# -gt 0 ] && shift
  [ $fmt = int4 ] && flag=-DTINY_INT4
  arm-none-eabi-g++ "${common[@]}" $opt ${b[2]} ${b[3]} -mthumb -mfloat-abi=hard -ffunction-sections -fdata-sections $flag \
    -isystem "$out/host-headers" -I"$here" -I"$out/$fmt" -I"$out" \
    -DTINY_BANNER="\"tiny Llama, $fmt weights: MPS2 ${b[0]^^} (${b[2]#-mcpu=})\"" \
    -nostartfiles -L"$here" -T "$here/${b[4]}" --specs=nano.specs --specs=nosys.specs -Wl,--gc-sections \
    "$@" "$here/text.cpp" "$here/startup.cpp" -lm -o "$out/$fmt/${b[0]}$name$opt.elf"
}
body() { sed -n '2,/^tokens:/p' "$1"; }  # the text and the tokens (not the banner)
bits() { sed -n 's/^logits fnv1a: //p' "$1"; }  # the hash of every logit's bits
failed=0
check_image() {  # elf
  if arm-none-eabi-nm -C "$1" | grep -E "__cxa_throw|__cxa_allocate|typeinfo for|malloc|_sbrk|operator new"; then
    echo "the firmware links exception machinery, RTTI or the heap (above)"; exit 1
  fi
}
stack() {  # board elf log limit: the measured high-water mark vs the static bound (and a limit)
  local measured bound
  measured=$(sed -n 's/^stack high-water mark: \([0-9]*\) bytes/\1/p' "$3")
  python3 "$here/stack_bound.py" "$2" > "$2.stack"
  bound=$(sed -n 's/^static stack bound: \([0-9]*\) bytes.*/\1/p' "$2.stack")
  echo "== $1: stack measured $measured bytes, static bound $bound"
  if [ -z "$measured" ] || [ "$measured" -gt "$bound" ] || [ "$bound" -gt $((2 * measured)) ] || [ "$measured" -gt "$4" ]; then
    cat "$2.stack"
    echo "!! the stack does not hold (measured $measured, bound $bound: bound >= measured, within 2x, measured <= $4)"; failed=1
  fi
}
same_text() {  # what log
  if ! cmp -s <(body "$2") <(body "$out/$fmt/host.txt"); then
    echo "!! $1: the text or tokens differ from the host's scalar build:"; diff <(body "$out/$fmt/host.txt") <(body "$2") || true
    failed=1; return 1
  fi
}
# The text firmware (-O2; the prompt encoded on the device): text, tokens and logits against the
# host, the memory map against the linker, instructions per token (qemu -icount), the stack.
run() {  # board fmt
  local b=($1) fmt=$2 elf="$out/$2/${b[0]}-O2.elf" log="$out/$2/${b[0]}.txt"
  firmware "$1" $fmt -O2
  check_image "$elf"
  timeout 600 qemu-system-arm -M ${b[1]} -nographic -monitor none -serial none -icount shift=0 \
    -semihosting-config enable=on,target=native -kernel "$elf" > "$log" 2>&1
  cat "$log"
  if same_text "${b[0]} $fmt" "$log"; then
    if [ "$(bits "$log")" = "$(bits "$out/$fmt/host.txt")" ]; then
      echo "== ${b[0]} $fmt: text, tokens and every logit's bits equal the host's scalar build"
    elif [ "${b[5]}" = bits ]; then
      echo "!! ${b[0]} $fmt: the logits' bits differ from the host's scalar build"; failed=1
    else
      echo "== ${b[0]} $fmt: text and tokens equal the host's scalar build (the logits' bits differ: newlib's single-precision expf)"
    fi
  fi
  if python3 "$here/memory_map_check.py" "$log" "$elf"; then echo "== ${b[0]} $fmt: the memory map equals the linker's symbol sizes"; else failed=1; fi
  stack "${b[0]} $fmt text firmware" "$elf" "$log" 4096
}
# The generate firmware (-Os: the footprint target's build; the prompt's ids encoded on the host):
# the same text and tokens, and a stack within 2 KB.
ids=$(sed -n 's/^prompt ids: //p' "$out/int8/host.txt")
generate() {  # board
  local b=($1) fmt=int8 elf="$out/int8/${b[0]}-ids-Os.elf" log="$out/int8/${b[0]}-ids.txt"
  firmware "$1" int8 -Os -ids "-DTINY_PROMPT_IDS=$ids"
  check_image "$elf"
  timeout 600 qemu-system-arm -M ${b[1]} -nographic -monitor none -serial none \
    -semihosting-config enable=on,target=native -kernel "$elf" > "$log" 2>&1
  same_text "${b[0]} generate firmware" "$log" && echo "== ${b[0]} int8 generate firmware (-Os): text and tokens equal the host's"
  stack "${b[0]} int8 generate firmware" "$elf" "$log" 2048
}
for b in "${boards[@]}"; do run "$b" int8; generate "$b"; done
run "${boards[0]}" int4

# Code size on the Cortex-M7: .text is code + read-only data; the weights (.weights), the tokenizer's
# tables (.tokenizer) and the RoPE table (.rope) are separate sections. The generate firmware
# (model, sampler, streaming decoder) and the text firmware (the encoder and its Unicode tables too).
firmware "${boards[0]}" int8 -Os
firmware "${boards[0]}" int8 -O2 -ids "-DTINY_PROMPT_IDS=$ids"
section() { arm-none-eabi-size -A "$1" | awk -v s="$2" '$1 == s { print $2 }'; }
e="$out/int8/an500"
echo "== footprint, Cortex-M7, int8 (bytes)   generate -Os   generate -O2   text -Os   text -O2"
for s in .text .weights .tokenizer .rope .data .bss; do
  printf "   %-32s %9s %14s %10s %10s\n" $s "$(section $e-ids-Os.elf $s)" "$(section $e-ids-O2.elf $s)" \
    "$(section $e-Os.elf $s)" "$(section $e-O2.elf $s)"
done
gos=$(section $e-ids-Os.elf .text); go2=$(section $e-ids-O2.elf .text); tos=$(section $e-Os.elf .text)
# targets: generate within 24 KB at -Os and 40 KB at -O2; the text firmware held to today's size + 2.5%
if [ "$gos" -gt 24576 ] || [ "$go2" -gt 40960 ] || [ "$tos" -gt 35840 ]; then
  echo "!! firmware code above its targets (generate -Os $gos > 24576, -O2 $go2 > 40960, or text -Os $tos > 35840)"; failed=1
fi
exit $failed
