// Package memory defines how every part of kdump-syms reads memory: the
// [Reader] interface over uint64 addresses, the [FaultError] that names the
// address a read failed at, the [Target] that describes the machine a
// dump holds (byte order, pointer size, page size), and small helpers
// shared by the decoders.
//
// Kernel virtual addresses on 64-bit machines lie above math.MaxInt64, so
// io.ReaderAt (whose offsets are int64) cannot describe them; [Reader] has
// the shape of ReadAt with a uint64 address instead.
//
// The package performs no I/O of its own and imports nothing else of this
// module.
package memory
