// Package printk reads the kernel log (what dmesg prints) from a crash
// dump's kernel memory, through the description VMCOREINFO gives of it.
// It needs no vmlinux and no debug info.
//
// Two layouts exist, and Open picks the one VMCOREINFO describes:
//
//   - The lockless ring buffer of kernels 5.10 and later
//     (kernel/printk/printk_ringbuffer.c). SYMBOL(prb) points at a struct
//     printk_ringbuffer holding a descriptor ring (2^count_bits struct
//     prb_desc with their struct printk_info beside them) and a text data
//     ring of 2^size_bits bytes. A descriptor's state_var holds its id and,
//     in the top two bits, its state (reserved, committed, finalized,
//     reusable); its text_blk_lpos gives the logical positions [begin,
//     next) of its data block, whose first word repeats the id and whose
//     rest is the text. A block that would cross the ring's end is stored
//     at its start instead. Records are walked from tail_id to head_id, as
//     crash and makedumpfile do; the info's seq, ts_nsec, text_len,
//     caller_id and dev_info come from VMCOREINFO's offsets, and facility
//     and the flags/level byte from the two bytes after text_len, where
//     every kernel since 5.10 keeps them.
//   - The buffer of variable-length records of kernels 3.5 to 5.9: see
//     varbuf.go. VMCOREINFO names log_buf, log_buf_len, log_first_idx and
//     log_next_idx and describes struct printk_log (struct log before
//     3.11).
//
// Every record the walk reaches is returned. Where records cannot be read
// (a descriptor or text in a page the dump does not hold, control data
// that contradicts itself) a Gap stands in their place, with the count
// lost where the layout tells it, and the walk goes on.
//
// # Errors
//
// Open fails with an error wrapping ErrMissingInfo when VMCOREINFO does not
// describe the log, ErrCorrupt when the control data is impossible, or a
// *memory.FaultError when it cannot be read. Gaps carry errors wrapping
// memory.ErrNotSaved, ErrCorrupt or ErrIncomplete (a record being written
// or recycled when the dump was taken).
//
// # Security
//
// Built for untrusted input, and fuzzed. Sizes and offsets from VMCOREINFO
// are checked against their structs; the ring is at most 2^31 bytes with at
// most 2^26 descriptors, the older buffer at most 2^31 bytes (the kernel's
// LOG_BUF_LEN_MAX); a walk visits each descriptor or each 4-byte step of
// the buffer at most once. Memory is read through a 64 KiB window per
// region; no allocation is sized by a value read from the dump beyond a
// record's text (at most 64 KiB, a u16).
package printk
