//! Cache-line prefetch hints, shared by the block, filter and fence
//! lookups of a table.

/// Hints the CPU to load every cache line of `items`, the last line first
/// (a block's trailer and restart array are read before its entries).
#[inline]
pub(crate) fn prefetch_lines<T>(items: &[T]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        const LINE: usize = 64;
        let p = items.as_ptr().cast::<i8>();
        let len = std::mem::size_of_val(items);
        if let Some(last) = len.checked_sub(1) {
            // SAFETY: a prefetch is a hint that never faults or reads
            // into the program; the address lies inside `items`.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(last)) };
        }
        for off in (0..len).step_by(LINE) {
            // SAFETY: as above; `off < len`.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(off)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = items;
}
