#!/usr/bin/env python3
"""The memory map a firmware prints (compile-time constants) against the linker's symbol sizes:
each role's bytes must equal the sizes of the objects that hold it.
  memory_map_check.py firmware.log firmware.elf [finetune]   (finetune: the adapter fine-tune's map)"""
import subprocess
import sys

ROLES = {  # printed row -> the symbols (demangled; a trailing :: takes every symbol of a namespace)
    "flash weights": ["tiny_weights"],
    "flash tokenizer_tables": ["tiny_tokenizer_data::"],
    "ram kv_cache": ["cache"],
    "ram generation_workspace": ["gen"],
    "ram prompt_encoding": ["encode_ws", "ids"],
}
FINETUNE = {  # examples/cortex_m/finetune.cpp: ct::adapter_training_memory
    "flash weights (frozen)": ["tiny_weights"],
    "ram adapters": ["adapters"],
    "ram adapter_gradients": ["grads"],
    "ram adamw_state": ["opt"],
    "ram activations": ["acts"],
    "ram train_workspace": ["ws"],
    "ram batch": ["tokens", "targets"],
}
log, elf = sys.argv[1], sys.argv[2]
if sys.argv[3:] == ["finetune"]:
    ROLES = FINETUNE
printed = {}
for line in open(log):
    if line.startswith("  "):
        key, _, value = line.strip().rpartition(" ")
        printed[key] = int(value) if value.isdigit() else None
sizes = {}
for line in subprocess.run(["arm-none-eabi-nm", "-C", "-S", elf], capture_output=True, text=True, check=True).stdout.splitlines():
    parts = line.split(None, 3)
    if len(parts) == 4:
        sizes[parts[3]] = int(parts[1], 16)
bad = 0
for role, syms in ROLES.items():
    linked = sum(v for name, v in sizes.items() for s in syms if (name.startswith(s) if s.endswith("::") else name == s))
    if printed.get(role) != linked:
        print("!! memory map: %s is %s bytes, the linker's %s %d" % (role, printed.get(role), " + ".join(syms), linked))
        bad = 1
    else:
        print("   %-26s %8d bytes = %s" % (role, linked, " + ".join(syms)))
sys.exit(bad)
