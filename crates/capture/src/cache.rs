//! Cache hints for the consumer: what a record a few places ahead will
//! need is asked for before it is decoded, so that the misses of several
//! records overlap instead of stalling one after the other.

/// Asks the CPU to bring the line at `p` into its cache without waiting
/// for it (a hint: it reads nothing and never faults; nothing where the
/// target has no such instruction).
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 is a hint: any address is fine.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>())
    };
    #[cfg(target_arch = "aarch64")]
    // SAFETY: PRFM is a hint: any address is fine.
    unsafe {
        std::arch::asm!("prfm pldl1keep, [{0}]", in(reg) p, options(nostack, readonly, preserves_flags))
    };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let _ = p;
}
