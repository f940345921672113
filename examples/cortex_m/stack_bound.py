#!/usr/bin/env python3
"""A static bound on a firmware's stack, from its linked image (the library's code, newlib's and
libgcc's alike): each function's frame is what its instructions take from sp (push, stmdb sp!,
vpush, sub sp, pre-indexed stores with writeback), the call graph is its direct calls (bl, blx
#imm) and tail calls (b to another function); the bound is the deepest path from the root. It
fails on what would make a bound meaningless: recursion, an indirect call (but in the reset
handler's constructor loop), or sp lowered by a register (a variable-length array or alloca).

  stack_bound.py firmware.elf [ROOT]      (ROOT default firmware_main; prints the bound in bytes)
"""
import re
import subprocess
import sys

REG = {"sl": 10, "fp": 11, "ip": 12, "sp": 13, "lr": 14, "pc": 15}


def reg_count(lst):
    """registers in an objdump register list: {r4, r5, lr}, {d8-d11}"""
    n = 0
    for part in lst.split(","):
        part = part.strip()
        if "-" in part:
            a, b = part.split("-")
            num = lambda r: REG[r] if r in REG else int(r[1:])
            n += num(b) - num(a) + 1
        elif part:
            n += 1
    return n


def analyse(elf):
    dump = subprocess.run(["arm-none-eabi-objdump", "-d", "--no-show-raw-insn", elf], capture_output=True, text=True,
                          check=True).stdout
    funcs, order, cur = {}, [], None
    for line in dump.splitlines():
        m = re.match(r"^([0-9a-f]+) <(.+)>:$", line)
        if m:
            cur = m.group(2)
            funcs[cur] = {"addr": int(m.group(1), 16), "frame": 0, "calls": set(), "tail": set(), "problems": []}
            order.append(cur)
            continue
        m = re.match(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$", line)
        if not m or cur is None:
            continue
        op, args = m.group(2), m.group(3)
        f = funcs[cur]
        lst = re.search(r"\{([^}]*)\}", args)
        if op in ("push", "push.w") and lst:
            f["frame"] += 4 * reg_count(lst.group(1))
        elif op in ("stmdb", "stmdb.w", "stmfd") and args.startswith("sp!") and lst:
            f["frame"] += 4 * reg_count(lst.group(1))
        elif op in ("vpush", "vpush.64", "vpush.32", "vstmdb") and lst:
            if op == "vstmdb" and not args.startswith("sp!"):
                continue
            regs = lst.group(1)
            f["frame"] += (8 if regs.strip().startswith("d") else 4) * reg_count(regs)
        elif re.match(r"^sub(s|w|\.w)?$", op) and re.match(r"^sp,\s*(sp,\s*)?", args):
            imm = re.search(r"#(\d+)", args)
            if imm:
                f["frame"] += int(imm.group(1))
            else:
                f["problems"].append("sp lowered by a register: " + args)
        elif re.match(r"^str[a-z]*(\.w)?$", op) and re.search(r"\[sp,\s*#-(\d+)\]!", args):
            f["frame"] += int(re.search(r"\[sp,\s*#-(\d+)\]!", args).group(1))
        elif op in ("bl", "blx") and re.match(r"^[0-9a-f]+ <", args):
            f["calls"].add(re.match(r"^[0-9a-f]+ <([^>+]+)", args).group(1))
        elif op in ("blx",) or (op in ("bx",) and args.strip() != "lr"):
            f["problems"].append("indirect call: %s %s" % (op, args))
        elif re.match(r"^b(\.w|\.n)?$", op) and re.match(r"^[0-9a-f]+ <([^>+]+)>", args):
            target = re.match(r"^[0-9a-f]+ <([^>+]+)>", args).group(1)
            if target != cur:
                f["tail"].add(target)
    return funcs


def bound(funcs, root):
    depth, onpath, path = {}, set(), {}

    def visit(name):
        if name in depth:
            return depth[name]
        if name in onpath:
            raise SystemExit("stack_bound: recursion through %s" % name)
        f = funcs.get(name)
        if f is None:
            raise SystemExit("stack_bound: no code for %s" % name)
        if f["problems"] and name != "reset_handler":
            raise SystemExit("stack_bound: %s: %s" % (name, "; ".join(f["problems"])))
        onpath.add(name)
        best, via = 0, None
        for c in f["calls"] | f["tail"]:
            d = visit(c)
            if d > best:
                best, via = d, c
        onpath.discard(name)
        depth[name] = f["frame"] + best
        path[name] = via
        return depth[name]

    total = visit(root)
    chain, n = [], root
    while n:
        chain.append((n, funcs[n]["frame"]))
        n = path[n]
    return total, chain


def main():
    elf = sys.argv[1]
    root = sys.argv[2] if len(sys.argv) > 2 else "firmware_main"
    funcs = analyse(elf)
    total, chain = bound(funcs, root)
    # the measured high-water mark counts from the top of the stack: the reset handler's frame too
    reset = funcs.get("reset_handler", {"frame": 0})["frame"]
    print("static stack bound: %d bytes (reset_handler %d + %s %d); deepest path:" % (total + reset, reset, root, total))
    for name, frame in chain:
        print("  %6d  %s" % (frame, subprocess.run(["arm-none-eabi-c++filt", name], capture_output=True,
                                                      text=True).stdout.strip()[:110]))


if __name__ == "__main__":
    main()
