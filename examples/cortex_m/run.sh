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
pkgs=(g++ libboost-dev gcc-arm-none-eabi libnewlib-arm-none-eabi libstdc++-arm-none-eabi-newlib qemu-system-arm)
missing=()
for p in "${pkgs[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${missing[@]}"
fi

# Boost.Hana from the build machine, alone (the cross compiler must not see the host's C headers).
mkdir -p "$out/host-headers" && ln -sfn /usr/include/boost "$out/host-headers/boost"
fixture="$root/tests/data/cortex_m_d32.safetensors"

echo "== converter (host, scalar panel layout)"
g++ -std=c++20 -O1 -DCTFORMER_SCALAR -I"$root/include" "$here/convert.cpp" -o "$out/convert"
"$out/convert" "$fixture" "$out" cm_weights params.

echo "== firmware (arm-none-eabi-g++, Cortex-M7)"
flags=(-std=c++20 -O2 -mcpu=cortex-m7 -mthumb -mfloat-abi=hard -mfpu=fpv5-d16 -fno-exceptions -fno-rtti
       -ffunction-sections -fdata-sections -Wall -Wextra -Wpedantic -Werror
       -I"$root/include" -isystem "$out/host-headers" -I"$out" "-DCM_FIXTURE=\"$fixture\"")
start=$SECONDS
arm-none-eabi-g++ "${flags[@]}" -nostartfiles -T "$here/mps2_an500.ld" --specs=nano.specs --specs=nosys.specs \
  -Wl,--gc-sections "$here/main.cpp" "$here/startup.cpp" -lm -o "$out/firmware.elf"
echo "built in $((SECONDS - start)) s"
arm-none-eabi-size -A "$out/firmware.elf" | grep -E "section|^\.(text|weights|fixture|data|bss)"
if arm-none-eabi-nm -C "$out/firmware.elf" | grep -E "__cxa_throw|__cxa_allocate|typeinfo for|malloc|_sbrk|operator new"; then
  echo "the firmware links exception machinery, RTTI or the heap (above)"
  exit 1
fi
echo "no exceptions, RTTI, malloc or _sbrk in the image"

echo "== run (qemu-system-arm -M mps2-an500)"
timeout 300 qemu-system-arm -M mps2-an500 -nographic -monitor none -serial none \
  -semihosting-config enable=on,target=native -kernel "$out/firmware.elf"
