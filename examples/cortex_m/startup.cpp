// Bare-metal start for an ARMv7-M core (the MPS2 AN500 board's Cortex-M7 under qemu-system-arm):
// vector table, .data/.bss set-up, FPU enable, firmware_main, and semihosting for output and the exit code.
#include <cstdint>

#include "semihosting.hpp"

extern "C" {
extern std::uint32_t __data_load[], __data_start[], __data_end[], __bss_start[], __bss_end[], __stack_top[];
extern void (*__init_array_start[])();
extern void (*__init_array_end[])();
int firmware_main();  // the program (C++ forbids calling main)

[[noreturn]] void reset_handler() {
    // Full access to the FPU (CP10, CP11) before any floating-point instruction.
    *reinterpret_cast<volatile std::uint32_t*>(0xE000ED88) |= 0xFu << 20;
    __asm__ volatile("dsb\n isb" ::: "memory");
    for (std::uint32_t *src = __data_load, *dst = __data_start; dst < __data_end;) *dst++ = *src++;
    for (std::uint32_t* dst = __bss_start; dst < __bss_end;) *dst++ = 0;
    for (auto* f = __init_array_start; f < __init_array_end; ++f) (*f)();
    semihosting::exit(firmware_main() == 0);
}

[[noreturn]] void fault_handler() {
    semihosting::write("fault: the firmware crashed\n");
    semihosting::exit(false);
}

__attribute__((section(".isr_vector"), used)) void (*const vector_table[16])() = {
    reinterpret_cast<void (*)()>(__stack_top), reset_handler, fault_handler, fault_handler, fault_handler,
    fault_handler, fault_handler, nullptr, nullptr, nullptr, nullptr, fault_handler, fault_handler, nullptr,
    fault_handler, fault_handler};
}
