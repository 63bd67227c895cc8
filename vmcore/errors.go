package vmcore

import "errors"

// The sentinels carry no package prefix: Open and OpenReaderAt, which
// return them, prefix "vmcore:" and the path.

// ErrUnrecognizedFormat means no opener recognised the file: it is neither
// an ELF core nor a kdump-compressed file, plain or wrapped in xz, zstd or
// gzip.
var ErrUnrecognizedFormat = errors.New("unrecognized dump format")

// ErrTooLarge means a compressed wrapper decompressed to more than
// Options.MaxDecompressedSize.
var ErrTooLarge = errors.New("decompressed dump exceeds size limit")

// ErrSingleFile means several files were given for a dump whose format
// is one file: only a kdump-compressed dump is split into several
// (makedumpfile --split).
var ErrSingleFile = errors.New("only a kdump-compressed dump is split into several files")
