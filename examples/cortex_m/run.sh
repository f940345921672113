#!/usr/bin/env bash
# The Cortex-M example, end to end: convert the weights to a flash image on the build machine,
# build the firmware with arm-none-eabi-g++ (Cortex-M7, hard float, -O2, -fno-exceptions
# -fno-rtti, newlib without stdio), report its footprint, check that no exception machinery or heap
# is linked, and run it on qemu-system-arm's MPS2 AN500 board (semihosting for output and exit).
#   examples/cortex_m/run.sh [BUILD_DIR]        (default build-cortex-m)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=$(mkdir -p "${1:-$root/build-cortex-m}" && cd "${1:-$root/build-cortex-m}" && pwd)
pkgs=(g++ libboost-dev gcc-arm-none-eabi libnewlib-arm-none-eabi libstdc++-arm-none-eabi-newlib qemu-system-arm python3)
missing=()
for p in "${pkgs[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${missing[@]}"
fi

# Boost.Hana from the build machine, alone (the cross compiler must not see the host's C headers).
mkdir -p "$out/host-headers" && ln -sfn /usr/include/boost "$out/host-headers/boost"
fixture="$root/tests/data/cortex_m_d32.safetensors"

# Two builds: float weights, and int8 weights (-DCM_INT8: quantized by the converter), each
# converted, built, checked for exceptions/heap and run; then their footprints side by side.
build() {  # $1: fp32 | int8, $2: extra flags
  local dir="$out/$1"
  mkdir -p "$dir"
  echo "== [$1] converter (host, scalar panel layout)"
  g++ -std=c++20 -O1 -DCTFORMER_SCALAR $2 -I"$root/include" "$here/convert.cpp" -o "$dir/convert"
  "$dir/convert" "$fixture" "$dir" cm_weights params.

  echo "== [$1] firmware (arm-none-eabi-g++, Cortex-M7)"
  local flags=(-std=c++20 -O2 -mcpu=cortex-m7 -mthumb -mfloat-abi=hard -mfpu=fpv5-d16 -fno-exceptions -fno-rtti
       -ffunction-sections -fdata-sections -Wall -Wextra -Wpedantic -Werror $2
       -I"$root/include" -isystem "$out/host-headers" -I"$dir" "-DCM_FIXTURE=\"$fixture\"")
  local start=$SECONDS
  arm-none-eabi-g++ "${flags[@]}" -nostartfiles -L"$here" -T "$here/mps2_an500.ld" --specs=nano.specs --specs=nosys.specs \
    -Wl,--gc-sections "$here/main.cpp" "$here/startup.cpp" -lm -o "$dir/firmware.elf"
  echo "built in $((SECONDS - start)) s"
  # and at -Os, for its size (the image a part with little flash gets; not run)
  arm-none-eabi-g++ "${flags[@]}" -Os -nostartfiles -L"$here" -T "$here/mps2_an500.ld" --specs=nano.specs \
    --specs=nosys.specs -Wl,--gc-sections "$here/main.cpp" "$here/startup.cpp" -lm -o "$dir/firmware-Os.elf"
  for elf in "$dir/firmware.elf" "$dir/firmware-Os.elf"; do
    if arm-none-eabi-nm -C "$elf" | grep -E "__cxa_throw|__cxa_allocate|typeinfo for|malloc|_sbrk|operator new"; then
      echo "$elf links exception machinery, RTTI or the heap (above)"
      exit 1
    fi
  done
  echo "no exceptions, RTTI, malloc or _sbrk in the image"

  echo "== [$1] run (qemu-system-arm -M mps2-an500)"
  timeout 300 qemu-system-arm -M mps2-an500 -nographic -monitor none -serial none \
    -semihosting-config enable=on,target=native -kernel "$dir/firmware.elf"
}
build fp32 ""
build int8 "-DCM_INT8"

# Footprint: the weights image (.weights), code (.text: code and read-only data), RAM (.data, .bss)
section() { arm-none-eabi-size -A "$out/$1/firmware${3:-}.elf" | awk -v s="$2" '$1 == s { print $2 }'; }
echo "== footprint (bytes)        fp32      int8   int8/fp32"
for s in .weights .text .data .bss; do
  f=$(section fp32 $s); i=$(section int8 $s)
  awk -v s="$s" -v f="$f" -v i="$i" 'BEGIN { printf "   %-20s %9d %9d   %.3f\n", s, f, i, f ? i / f : 0 }'
done
f=$(section fp32 .text -Os); i=$(section int8 .text -Os)
echo "   .text at -Os         $(printf '%9d %9d' "$f" "$i")"
# (the target: this layer with forward, step and its loader within 40 KB of code, at -O2 and -Os)
o2=$(section fp32 .text)
if [ "$o2" -gt 40960 ]; then echo "the float layer firmware is $o2 bytes of code at -O2, above 40 KB"; exit 1; fi
if [ "$f" -gt 40960 ]; then echo "the float layer firmware is $f bytes of code at -Os, above 40 KB"; exit 1; fi

# The tokenizer's code (-Os, Cortex-M7): the tables' check, + encode, + the streaming decoder, each
# the .text difference of tokenizer_probe.cpp's builds; the tables (600 pieces) are read-only data.
# Target: encode within 8 KB.
python3 "$root/tools/export.py" --tokenizer "$root/tests/data/text/sp_bpe_identity.model" "$out/tok.safetensors" \
  --header "$out/sp_identity_tables.hpp" --name sp_identity >/dev/null
probe() {  # extra flags -> .text bytes of the object
  arm-none-eabi-g++ -std=c++20 -Os -mcpu=cortex-m7 -mthumb -mfloat-abi=hard -mfpu=fpv5-d16 -fno-exceptions -fno-rtti \
    -ffunction-sections -fdata-sections -Wall -Wextra -Wpedantic -Werror "$@" -I"$root/include" -isystem "$out/host-headers" \
    -I"$out" -c "$here/tokenizer_probe.cpp" -o "$out/probe.o"
  arm-none-eabi-size -A "$out/probe.o" | awk '$1 ~ /^\.text/ { t += $2 } END { print t }'
}
load=$(probe); enc=$(probe -DPROBE_ENCODE); dec=$(probe -DPROBE_DECODE)
echo "== tokenizer code (bytes, -Os): tables' check $load, encode $((enc - load)), streaming decode $((dec - load))"
if [ $((enc - load)) -gt 8192 ]; then
  echo "the tokenizer's encode is $((enc - load)) bytes of code, above the 8 KB target"
  exit 1
fi

# The tiny Llama generating text on three boards (AN500 Cortex-M7, AN386 Cortex-M4F, AN505
# Cortex-M33): tokens equal to the host's scalar build, the memory map equal to the linker's, the
# stack measured and bounded, instructions per token, code size (text.sh).
"$here/text.sh" "$out/text"

# Fine-tuning on the board: LoRA adapters over the tiny Llama's int8 weights in flash, trained in
# 256 KB of RAM on the Cortex-M7, every loss equal to the host's scalar build (finetune.sh).
"$here/finetune.sh" "$out/finetune"
