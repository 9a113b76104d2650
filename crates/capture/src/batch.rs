//! Reading a whole BPF hash map in batches (`BPF_MAP_LOOKUP_BATCH`).
//!
//! Not libbpf-rs's `lookup_batch` iterator: it takes a batch shorter than
//! asked for as the last one, but the kernel's hash map ends a batch early
//! whenever the next bucket's entries do not fit in what is left of it,
//! and says the map is done only with ENOENT. On a map of tens of
//! thousands of sums the iterator stopped after its first batch, most
//! runs: the final round of `--detail summary` then wrote a part of the
//! sums and dropped the rest without a word (7,757 of 20,000 files read
//! as 0 bytes).

use std::os::fd::AsRawFd;

use libbpf_rs::MapCore;

/// Entries asked for per call.
const BATCH: u32 = 4096;

/// Calls `f` on every (key, value) of `map` (a hash map), reading it in
/// batches until the kernel says it is done; `delete`: each batch is
/// taken out of the map as it is read (per bucket, under its lock: a value
/// cannot change between its read and its deletion). `Err(errno)` when
/// the kernel refused (before 5.6: no batch operations); entries already
/// given to `f` are not given again by the caller's fallback if it keeps
/// them.
pub fn for_each(map: &impl MapCore, delete: bool, mut f: impl FnMut(&[u8], &[u8])) -> Result<(), i32> {
    let (ksz, vsz) = (map.key_size() as usize, map.value_size() as usize);
    let n = BATCH as usize;
    let mut keys = vec![0u8; ksz * n];
    let mut values = vec![0u8; vsz * n];
    // The position token: a bucket index for hash maps (the kernel copies
    // as many bytes as the key has, at most).
    let token = ksz.max(8);
    let (mut from, mut to) = (vec![0u8; token], vec![0u8; token]);
    let opts = libbpf_sys::bpf_map_batch_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_map_batch_opts>() as _,
        ..Default::default()
    };
    let fd = map.as_fd().as_raw_fd();
    let mut first = true;
    loop {
        let mut count = BATCH;
        let start = if first { std::ptr::null_mut() } else { from.as_mut_ptr().cast() };
        // SAFETY: the buffers hold `BATCH` keys and values of the map's
        // sizes and a token of at least the key's size; `count` says how
        // many the kernel may write.
        let ret = unsafe {
            let call =
                if delete { libbpf_sys::bpf_map_lookup_and_delete_batch } else { libbpf_sys::bpf_map_lookup_batch };
            call(
                fd,
                start,
                to.as_mut_ptr().cast(),
                keys.as_mut_ptr().cast(),
                values.as_mut_ptr().cast(),
                &mut count,
                &opts,
            )
        };
        let errno = if ret < 0 { -ret } else { 0 };
        if errno != 0 && errno != libc::ENOENT {
            return Err(errno);
        }
        let got = (count as usize).min(n);
        for i in 0..got {
            f(&keys[i * ksz..(i + 1) * ksz], &values[i * vsz..(i + 1) * vsz]);
        }
        // ENOENT: no bucket is left (what this call read is still good).
        if errno == libc::ENOENT {
            return Ok(());
        }
        std::mem::swap(&mut from, &mut to);
        first = false;
    }
}
